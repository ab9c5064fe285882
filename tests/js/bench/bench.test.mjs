// scripts/bench on the tiny model, ours only: over several fresh processes the table gives each
// phase's median and the notes its spread (the table's figure inside it), and which form of the
// dot product ran; bad options refused by name.  Run: node --test tests/js/bench/bench.test.mjs
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import path from "node:path";
import {test} from "node:test";

import {model, root} from "../support/models.mjs";

const run = (args) => spawnSync(process.execPath, [path.join(root, "scripts", "bench"), ...args], {cwd: root, encoding: "utf8", timeout: 300_000});
const tiny = () => path.relative(root, model("tiny", "tiny", ["--type", "Q4_0"]));

test("--processes 3: the median of three fresh processes per phase, inside the spread the notes give", () => {
  const r = run(["--model", tiny(), "--threads", "1", "--reps", "1", "--processes", "3", "--skip", "llama,wllama"]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^CPU .*; class /);
  assert.equal(r.stderr.split("\n").filter((l) => l === "bench: ours, 1 thread(s)").length, 1);
  const rows = r.stdout.split("\n").filter((l) => /^\| 1 \| /.test(l)).map((l) => l.split("|").slice(1, -1).map((c) => c.trim()));
  assert.deepEqual(rows.map((row) => row[1]), ["prompt, 8 tokens", "prompt, 128 tokens", "decode, 1 token after 8"]);
  const spread = /Spread over 3 fresh processes \(ms\/layer, fastest–slowest process, each its best of 1; the table gives the median\): ours: (.*)\.\n/.exec(r.stdout);
  assert.ok(spread, r.stdout);
  const ranges = spread[1].split(", ").map((s) => /^1t (\w+) ([\d.]+)–([\d.]+) \(([\d.]+)×\)$/.exec(s));
  assert.deepEqual(ranges.map((m) => m?.[1]), ["prompt8", "prompt128", "decode"], spread[1]);
  ranges.forEach(([, key, lo, hi, ratio], i) => {
    const median = Number(rows[i][2]);  // to 0.1 ms; the spread to 3 digits
    assert.ok(Number(lo) - 0.05 <= median && median <= Number(hi) + 0.05, `${key}: median ${median} outside ${lo}–${hi}`);
    assert.ok(Math.abs(Number(ratio) / (Number(hi) / Number(lo)) - 1) < 0.02, `${key}: ${ratio} for ${lo}–${hi}`);
  });
  assert.match(r.stdout, /Median over 3 fresh processes of each one's minimum of 1 repetitions/);
  // Node 20 loads the SIMD128 module, which has no dot form to choose; Node 22+ name the form that ran
  assert.match(r.stdout, Number(process.versions.node.split(".")[0]) >= 22
    ? /wasm-relaxed-simd kernels; the Q4_0 dot product in (dot-add|pairs) form: / : /wasm-simd128 kernels, Node/);
});

test("bad options are refused by name", () => {
  for (const [args, message] of [
    [["--processes", "0"], /--processes 0: expected a whole number >= 1/],
    [["--processez", "2"], /unknown or valueless option --processez/],
  ]) {
    const r = run(args);
    assert.notEqual(r.status, 0, args.join(" "));
    assert.match(r.stderr, message);
  }
});
