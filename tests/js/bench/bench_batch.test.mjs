// scripts/bench-batch in --quick mode on the tiny synthetic model: its table has a row per engine
// and session count with numbers that hold together, its chart a line per engine, and bad options
// are refused by name.  Run: node --test tests/js/bench/bench_batch.test.mjs
import {test, after} from "node:test";
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

import {root} from "../support/models.mjs";

const script = path.join(root, "scripts", "bench-batch");
const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), "lf-bench-batch-"));
after(() => fs.rmSync(tmpDir, {recursive: true, force: true}));

const run = (args) => spawnSync(process.execPath, [script, ...args], {cwd: root, encoding: "utf8", timeout: 120_000});

// The table's rows as {threads, engine, sessions, tokensPerSecond, ...}, by column header.
function tableRows(md) {
  const lines = md.split("\n").filter((l) => l.startsWith("| "));
  const header = lines[0].split("|").slice(1, -1).map((c) => c.trim());
  return lines.slice(1).map((l) => Object.fromEntries(l.split("|").slice(1, -1).map((c, i) => [header[i], c.trim()])));
}

test("--quick: a row per engine and session count, numbers that hold together, and a chart", () => {
  const out = path.join(tmpDir, "quick.md"), svg = path.join(tmpDir, "quick.svg");
  const r = run(["--quick", "--out", out, "--svg", svg]);
  assert.equal(r.status, 0, r.stderr);
  const md = fs.readFileSync(out, "utf8");
  assert.match(md, /^CPU .*; class /);
  assert.match(md, /Command: `scripts\/bench-batch --quick/);
  const rows = tableRows(md);
  const engines = ["ours (LayerNode)", "llama.cpp", "ours, 2-node pipeline"];
  assert.deepEqual(rows.map((row) => `${row.threads} ${row.engine} ${row.sessions}`),
                   engines.flatMap((e) => [1, 2, 4].map((s) => `1 ${e} ${s}`)));
  for (const row of rows) {
    const what = `${row.engine}, ${row.sessions} session(s)`;
    const [tps, mean, p50, p90] = ["decode tokens/s", "per-token ms mean", "p50", "p90"].map((c) => Number(row[c]));
    assert.ok(Number.isFinite(tps) && tps > 0, `${what}: tokens/s ${row["decode tokens/s"]}`);
    assert.ok(mean > 0 && p50 > 0 && p50 <= p90, `${what}: latencies ${mean} ${p50} ${p90}`);
    // Each decode step's wall time is at least every session's latency in it, so the sessions
    // together cannot beat sessions / mean latency (rounding of the printed figures aside).
    assert.ok(tps <= (Number(row.sessions) * 1000 / mean) * 1.1, `${what}: ${tps} tokens/s with a mean latency of ${mean} ms`);
    const vsOne = Number(row["× 1 session"]);
    if (row.sessions === "1") assert.equal(vsOne, 1);
    else assert.ok(Math.abs(vsOne * Number(rows.find((x) => x.engine === row.engine && x.sessions === "1")["decode tokens/s"]) - tps) <= 0.02 * tps, `${what}: × 1 session ${vsOne}`);
    if (row.engine === "llama.cpp") continue;
    assert.ok(Number(row["÷ llama.cpp"]) > 0, `${what}: ÷ llama.cpp ${row["÷ llama.cpp"]}`);
    // Per node: forward calls per engine step, between one and every session's, or – for a
    // node that has no batchStats() (it runs its calls one at a time).
    const cell = row["forwards per engine step"];
    const perNode = cell.split(" · ");
    assert.equal(perNode.length, row.engine.includes("pipeline") ? 2 : 1, `${what}: ${cell}`);
    for (const c of perNode) assert.ok(c === "–" || (Number(c) >= 1 && Number(c) <= Number(row.sessions)), `${what}: forwards per engine step ${c}`);
  }
  const chart = fs.readFileSync(svg, "utf8");
  assert.match(chart, /^<svg [^>]*>[\s\S]*<\/svg>\n$/);
  assert.equal((chart.match(/<polyline /g) ?? []).length, 3, "a line per engine at one thread count");
  assert.equal((chart.match(/<circle /g) ?? []).length, rows.length, "a point per row");
});

test("forwards per engine step come from the node's batchStats(), over the decode steps only", () => {
  // A js-glue whose LayerNode reports two forward calls per engine step for every decode call
  // and five for every prompt: the column must show the decode steps' two.
  const glue = path.join(tmpDir, "glue");
  const real = (file) => JSON.stringify(path.join(root, "js-glue", file));
  fs.mkdirSync(path.join(glue, "src", "node"), {recursive: true});
  fs.mkdirSync(path.join(glue, "src", "gguf"), {recursive: true});
  fs.writeFileSync(path.join(glue, "src", "gguf", "model_header.js"), `export * from ${real("src/gguf/model_header.js")};\n`);
  fs.writeFileSync(path.join(glue, "src", "node", "layer_node.js"), `import {LayerNode as Real} from ${real("src/node/layer_node.js")};
export const LayerNode = {
  async open(options) {
    const node = await Real.open(options);
    let batches = 0, entries = 0;
    const forward = node.forward.bind(node);
    node.forward = (call) => {
      batches += 1;
      entries += call.hidden.length > node.nEmbd ? 5 : 2;
      return forward(call);
    };
    node.batchStats = () => ({batches, entries});
    return node;
  },
};
`);
  const out = path.join(tmpDir, "stats.md");
  const r = run(["--quick", "--skip", "llama,pipeline", "--glue", glue, "--out", out]);
  assert.equal(r.status, 0, r.stderr);
  const rows = tableRows(fs.readFileSync(out, "utf8"));
  assert.deepEqual(rows.map((row) => row["forwards per engine step"]), ["2.00", "2.00", "2.00"]);
});

test("bad options are refused by name", () => {
  for (const [args, message] of [
    [["--sessions", "1,0"], /--sessions 1,0: expected positive integers/],
    [["--steps", "two"], /--steps two: expected a positive integer/],
    [["--skip", "ours"], /--skip ours: expected one or more of llama, pipeline/],
    [["--sessoins", "2"], /unknown option --sessoins/],
    [["--out"], /--out needs a value/],
    [["--model", "no/such.gguf"], /--model no\/such.gguf: no such file/],
    [["--quick", "--prompt", "5000"], /--prompt 5000 \+ --steps 4 positions exceed .*tiny.gguf's context of 512/],
  ]) {
    const r = run(args);
    assert.equal(r.status, 2, `${args.join(" ")}: status ${r.status}, ${r.stderr}`);
    assert.match(r.stderr, message);
  }
});
