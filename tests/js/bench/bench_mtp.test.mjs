// scripts/bench-mtp in --quick mode on the tiny target and drafter: a row per acceptance rate
// whose numbers hold together (the script itself checks every run's tokens equal plain greedy
// decoding's and the tail's greedy continuation equal to it; a mismatch fails the run), kept
// drafts that follow the forced acceptance, and bad options refused by name. Never timings.
// Run: node --test tests/js/bench/bench_mtp.test.mjs
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import path from "node:path";
import {test} from "node:test";

import {root} from "../support/models.mjs";

const run = (args) => spawnSync(process.execPath, [path.join(root, "scripts", "bench-mtp"), ...args], {cwd: root, encoding: "utf8", timeout: 300_000});
const rowsOf = (stdout) => stdout.split("\n").filter((l) => l.startsWith("| ") && !l.startsWith("| acceptance"))
  .map((l) => l.split("|").slice(1, -1).map((c) => c.trim()));

test("--quick: plain decoding and a row per acceptance rate, drafts kept as forced", () => {
  const r = run(["--quick", "--alphas", "0,0.7,1"]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^CPU .*; class /);
  assert.match(r.stdout, /every run's tokens equal plain decoding's/);
  assert.match(r.stdout, /Step costs through the pipeline \(ms, median of 1\): decode [\d.]+, one drafted token [\d.]+ .*verify 1\.\.9 rows( [\d.]+ \/){8} [\d.]+× decode\./);
  const rows = rowsOf(r.stdout);
  assert.deepEqual(rows.map((row) => row[0]), ["plain decoding", "0", "0.7", "1"]);
  assert.ok(Number(rows[0][1]) > 0, `plain: ${rows[0][1]} tokens/s`);
  for (const [alpha, tokensPerSecond, kept, meanDraft, measured, predicted, best] of rows.slice(1)) {
    assert.ok(Number(tokensPerSecond) > 0, `α ${alpha}: ${tokensPerSecond} tokens/s`);
    assert.match(kept, /^\d+%$/);
    assert.ok(Number(meanDraft) >= 0 && Number(meanDraft) <= 8, `α ${alpha}: ${meanDraft} drafts a step`);
    for (const ratio of [measured, predicted]) assert.match(ratio, /^\d+\.\d\d×$/);
    assert.match(best, /^\d+\.\d\d× \(k = [1-8]\)$/);
  }
  // α 0: no drafted token is ever the continuation; α 1: every one is, so every verified draft is
  // kept (--quick's prompt gives a continuation that changes token early, so this also fails
  // with drafts placed one position off).
  assert.equal(rows[1][2], "0%");
  assert.equal(rows[3][2], "100%");
  assert.ok(Number(rows[3][3]) > 0, "at α 1 the policy verifies drafts");
  assert.match(r.stdout, /Goal, at least 1\.8× plain decoding at α 0\.7: (met|not met) \(\d+\.\d\d×\)\./);
});

test("bad options are refused by name", () => {
  for (const [args, message] of [
    [["--tokens", "0"], /--tokens 0: expected a positive integer/],
    [["--alphas", "0.5,1.5"], /--alphas 0\.5,1\.5: expected acceptance rates in \[0, 1\]/],
    [["--roundz", "2"], /unknown option --roundz/],
    [["--runs"], /--runs needs a value/],
  ]) {
    const r = run(args);
    assert.equal(r.status, 2, `${args.join(" ")}: status ${r.status}, ${r.stderr}`);
    assert.match(r.stderr, message);
  }
});
