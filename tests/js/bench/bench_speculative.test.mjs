// scripts/bench-speculative in --quick mode on the tiny model: a row per case whose numbers hold
// together (the script itself checks that the texts with and without drafts are equal), and
// bad options refused by name.  Run: node --test tests/js/bench/bench_speculative.test.mjs
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import path from "node:path";
import {test} from "node:test";

import {root} from "../support/models.mjs";

const run = (args) => spawnSync(process.execPath, [path.join(root, "scripts", "bench-speculative"), ...args], {cwd: root, encoding: "utf8", timeout: 300_000});

test("--quick: a row per case, tokens and drafts that add up", () => {
  const r = run(["--quick", "--draft-min-ngram", "1"]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^CPU .*; class /);
  const lines = r.stdout.split("\n").filter((l) => l.startsWith("| ") && !l.startsWith("| case"));
  const rows = lines.map((l) => l.split("|").slice(1, -1).map((c) => c.trim()));
  assert.deepEqual(rows.map((row) => row[0]), ["repetitive", "half", "non-repetitive"]);
  for (const [name, tokens, kept, rejected, without, withDrafts, ratio, slowest] of rows) {
    assert.ok(Number(slowest.replace("×", "")) > 0 && Number(slowest.replace("×", "")) <= Number(ratio.replace("×", "")) + 0.01, `${name}: slowest ${slowest}, all ${ratio}`);
    // Three prompts of at most 16 tokens each (fewer when an end-of-text token comes first).
    assert.ok(Number(tokens) >= 3 && Number(tokens) <= 48, `${name}: ${tokens} tokens`);
    assert.ok(Number(kept) >= 0 && Number(kept) < Number(tokens) && Number(rejected) >= 0, `${name}: kept ${kept}, rejected ${rejected}`);
    assert.ok(Number(without) > 0 && Number(withDrafts) > 0, `${name}: ${without} and ${withDrafts} tokens/s`);
    assert.ok(Math.abs(Number(ratio.replace("×", "")) - Number(withDrafts) / Number(without)) < 0.01, `${name}: ratio ${ratio}`);
  }
  assert.ok(Number(rows[0][2]) > 0, "greedy decoding of the tiny model loops: some drafts are kept");
});

test("bad options are refused by name", () => {
  for (const [args, message] of [
    [["--tokens", "0"], /--tokens 0: expected a positive integer/],
    [["--build", "fast"], /--build fast: expected threaded or single/],
    [["--roundz", "2"], /unknown option --roundz/],
    [["--rounds"], /--rounds needs a value/],
  ]) {
    const r = run(args);
    assert.equal(r.status, 2, `${args.join(" ")}: status ${r.status}, ${r.stderr}`);
    assert.match(r.stderr, message);
  }
});
