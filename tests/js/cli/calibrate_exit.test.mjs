// layerfold calibrate-exit (docs/approximate.md): the τ it reports, run again through an
// independent teacher-forced loop, gives the agreement and layers skipped it reported; a strict
// target keeps every top-1, a looser one exits more; its candidate τ values are the engine's exact
// exit points; bad input is refused before any model is loaded.
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {after, before, describe, test} from "node:test";

import {exitCandidates, exitThresholds} from "../../../js-glue/src/cli/calibrate_exit.js";
import {Pipeline} from "../../../js-glue/src/pipeline/pipeline.js";
import {model} from "../support/models.mjs";
import {cli} from "../support/server_process.mjs";

// With random weights and a tiny norm epsilon every layer moves the residual by about its own
// size, so any exit changes the top-1. A larger epsilon shrinks the layers' updates against the
// token embedding: some exits keep the top-1 and others do not, which gives the targets below
// different answers.
const file = () => model("small-eps0.3", "small", ["--eps", "0.3"]);
const NODES = "local:0-2,local:3-5";  // the exit state has to cross a node boundary
const POSITIONS = 48;
const N_LAYER = 6;
const TEXT = "The quick brown fox jumps over the lazy dog. Once upon a time there was a small village by the sea, " +
  "where the fishermen went out every morning before dawn and came back at noon with their boats full of fish.";

let dir;
let corpus;
before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "lf-calibrate-"));
  corpus = path.join(dir, "corpus.txt");
  fs.writeFileSync(corpus, TEXT);
});
after(() => fs.rmSync(dir, {recursive: true, force: true}));

const calibrate = (...args) => spawnSync(process.execPath, [cli, "calibrate-exit", ...args], {encoding: "utf8"});

function calibrateJson(agreement) {
  const r = calibrate("--model", file(), "--corpus", corpus, "--agreement", String(agreement), "--positions", String(POSITIONS),
    "--nodes", NODES, "--threads", "1", "--json");
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

// Our own teacher-forced loop: the corpus's first n tokens one a step through a pipeline opened
// with approx; per position the top-1 next token, its row's updates per layer (none when every
// mode is off) and how many layers it skipped (those whose update the engine reports as −1).
async function teacherForced(approx, n = POSITIONS) {
  const pipeline = await Pipeline.open({model: file(), nodes: NODES, threads: 1, build: "threaded", approx});
  try {
    const tokens = pipeline.tokenizer.encode(TEXT, {addBos: true}).slice(0, n);
    const rows = [];
    for (const token of tokens) {
      const {logits, timings} = await pipeline.step("s", [token]);
      let top1 = 0;
      for (let i = 1; i < logits.length; i++) if (logits[i] > logits[top1]) top1 = i;
      const updates = timings.flatMap((t) => t.approx?.early_exit.row_updates ?? []);
      rows.push({top1, skipped: updates.filter((u) => u === -1).length, updates});
    }
    return rows;
  } finally {
    await pipeline.close();
  }
}

function measured(rows, exact) {
  return {
    agreement: rows.filter((row, i) => row.top1 === exact[i].top1).length / rows.length,
    layersSkipped: rows.reduce((n, row) => n + row.skipped, 0) / rows.length,
  };
}

describe("calibrate-exit on a 6-layer model split over two nodes", () => {
  let exact;
  let strict;
  let loose;
  before(async () => {
    exact = await teacherForced({});
    strict = calibrateJson(1);
    loose = calibrateJson(0.5);
  });

  test("target 1: the reported τ exits somewhere, and our own run of it keeps every top-1 and skips what was reported", async () => {
    assert.equal(strict.positions, POSITIONS);
    assert.equal(strict.nLayer, N_LAYER);
    assert.ok(strict.threshold > 0, "a τ > 0 exists that keeps every top-1 on this corpus");
    const ours = measured(await teacherForced({earlyExit: true, exitThreshold: strict.threshold, exitWindow: 2}), exact);
    assert.equal(ours.agreement, 1);
    assert.equal(strict.agreement, 1);
    assert.ok(ours.layersSkipped > 0);
    assert.equal(strict.layersSkipped, ours.layersSkipped);
    assert.equal(strict.layersSkippedFraction, ours.layersSkipped / N_LAYER);
  });

  test("target 0.5: a τ at least the strict one, skipping at least as many layers, as our own run measures", async () => {
    const ours = measured(await teacherForced({earlyExit: true, exitThreshold: loose.threshold, exitWindow: 2}), exact);
    assert.equal(loose.agreement, ours.agreement);
    assert.equal(loose.layersSkipped, ours.layersSkipped);
    assert.ok(ours.agreement >= 0.5 && ours.agreement < 1, `agreement ${ours.agreement}`);
    assert.ok(loose.threshold >= strict.threshold);
    assert.ok(loose.layersSkipped >= strict.layersSkipped);
    assert.ok(loose.runs.length >= 1 && loose.runs.length <= Math.ceil(Math.log2(loose.candidates + 1)));
  });

  test("a candidate τ is the engine's exit point: at it the first token exits after the predicted layer, one f32 below it does not", async () => {
    const [first] = await teacherForced({earlyExit: true, exitThreshold: 0}, 1);
    const thresholds = exitThresholds(first.updates, 2);
    const lowest = Math.min(...thresholds);
    const below = new Float32Array([lowest]);
    new Uint32Array(below.buffer)[0] -= 1;
    const [at] = await teacherForced({earlyExit: true, exitThreshold: lowest}, 1);
    const [under] = await teacherForced({earlyExit: true, exitThreshold: below[0]}, 1);
    assert.equal(at.skipped, N_LAYER - 1 - thresholds.indexOf(lowest));
    assert.ok(at.skipped > 0);
    assert.equal(under.skipped, 0);
  });
});

describe("calibrate-exit's candidates, by hand", () => {
  test("window sums of f32-exact updates: the next f32 above each sum, none at the last layer or before the window fills", () => {
    const ulp = (x) => 2 ** (Math.floor(Math.log2(x)) - 23);
    assert.deepEqual(exitThresholds([0.5, 0.25, 0.125, 0.5, 1], 2), [Infinity, 0.75 + ulp(0.75), 0.375 + ulp(0.375), 0.625 + ulp(0.625), Infinity]);
    assert.deepEqual(exitThresholds([0, 0, 3], 1), [2 ** -149, 2 ** -149, Infinity]);
  });

  test("a position's exit layer moves only where its running minimum drops; predictions average over positions", () => {
    const ulp = (x) => 2 ** (Math.floor(Math.log2(x)) - 23);
    // Position A: thresholds ~0.75 (layer 1, skips 3), ~0.375 (layer 2, skips 2), ~0.625 (layer 3: not lower, never first).
    // Position B: ~0.5 (layer 1, skips 3).
    const candidates = exitCandidates([[0.5, 0.25, 0.125, 0.5, 1], [0.25, 0.25, 1, 1, 1]], 2);
    assert.deepEqual(candidates, [
      {threshold: 0.375 + ulp(0.375), predictedLayersSkipped: 1},
      {threshold: 0.5 + ulp(0.5), predictedLayersSkipped: 2.5},
      {threshold: 0.75 + ulp(0.75), predictedLayersSkipped: 3},
    ]);
  });
});

describe("calibrate-exit refuses bad input with exit 2, naming it", () => {
  const cases = [
    [["--corpus", "/nonexistent/corpus.txt"], /--corpus \/nonexistent\/corpus\.txt: cannot read it \(ENOENT\)/],
    [["--corpus", "EMPTY"], /is empty: calibration needs text/],
    [[], /--corpus is required/],
    [["--corpus", "CORPUS", "--agreement", "1.5"], /--agreement must be a number > 0 and <= 1, got "1\.5"/],
    [["--corpus", "CORPUS", "--agreement", "x"], /--agreement must be a number > 0 and <= 1, got "x"/],
    [["--corpus", "CORPUS", "--positions", "0"], /--positions must be an integer from 1 to 1048576, got "0"/],
    [["--corpus", "CORPUS", "--exit-window", "17"], /--exit-window must be an integer from 1 to 16, got "17"/],
  ];
  for (const [args, message] of cases) {
    test(args.join(" ") || "(no corpus)", () => {
      const empty = path.join(dir, "empty.txt");
      fs.writeFileSync(empty, " \n");
      const r = calibrate("--model", file(), ...args.map((a) => ({EMPTY: empty, CORPUS: corpus})[a] ?? a));
      assert.equal(r.status, 2, r.stdout);
      assert.match(r.stderr, message);
    });
  }
});
