// Approximate modes through the JS API (docs/approximate.md): off unless asked for, exact when
// their threshold allows nothing to be dropped, deterministic across threads and builds when on,
// and bad options refused by name without touching the session.
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {LayerNode} from "../../js-glue/src/layer_node.js";
import {model} from "./models.mjs";

const file = () => model("small-q4", "small", ["--type", "Q4_0"]);
const PROMPT = Array.from({length: 48}, (_, i) => 2 + ((i * 37) % 200));
const truncated = (threshold) => ({truncatedAttention: true, truncationThreshold: threshold});

// The prompt and one decode step through every layer: {bytes, stats}.
async function run(options, approx) {
  const node = await LayerNode.open({model: file(), ...options});
  try {
    const a = await node.forward({session: "s", startPos: 0, hidden: node.embed(PROMPT), approx});
    const b = await node.forward({session: "s", startPos: PROMPT.length, hidden: node.embed([7]), approx});
    return {bytes: Buffer.concat([Buffer.from(a.buffer), Buffer.from(b.buffer)]), stats: node.approxStats("s").truncated_attention};
  } finally {
    node.close();
  }
}

describe("truncated attention", () => {
  test("with threshold 0 nothing may be dropped: the exact engine's bytes", async () => {
    const exact = await run({build: "threaded", threads: 2});
    const zero = await run({build: "threaded", threads: 2}, truncated(0));
    assert.ok(zero.bytes.equals(exact.bytes));
    assert.equal(exact.stats.rows, 0);  // off: the mode did not run
    assert.ok(zero.stats.rows > 0);
  });

  test("on, it drops about half of the V work, changes the output, and gives the same bytes on every thread count and build", async () => {
    const exact = await run({build: "threaded", threads: 1});
    const runs = [
      await run({build: "threaded", threads: 1}, truncated(1)),
      await run({build: "threaded", threads: 2}, truncated(1)),
      await run({build: "single"}, truncated(1)),
    ];
    for (const r of runs.slice(1)) {
      assert.ok(r.bytes.equals(runs[0].bytes));
      assert.deepEqual(r.stats, runs[0].stats);
    }
    const {stats} = runs[0];
    assert.ok(!runs[0].bytes.equals(exact.bytes));
    assert.ok(stats.v_keys_kept < stats.v_keys_total);
    assert.ok(stats.v_work_skipped > 0.2 && stats.v_work_skipped < 0.8, `skipped ${stats.v_work_skipped}`);
    assert.ok(stats.max_error_bound > 0);
  });

  test("bad options are refused by name and leave the session as it was", async () => {
    const node = await LayerNode.open({model: file(), build: "single"});
    try {
      await node.forward({session: "s", startPos: 0, hidden: node.embed(PROMPT.slice(0, 8))});
      await assert.rejects(node.forward({session: "s", startPos: 8, hidden: node.embed([7]), approx: {truncatedAtention: true}}), /truncated_atention/);
      await assert.rejects(node.forward({session: "s", startPos: 8, hidden: node.embed([7]), approx: truncated(2)}), /truncation_threshold/);
      assert.equal(node.sessionLength("s"), 8);
      const reference = await LayerNode.open({model: file(), build: "single"});
      try {
        await reference.forward({session: "s", startPos: 0, hidden: reference.embed(PROMPT.slice(0, 8))});
        const want = await reference.forward({session: "s", startPos: 8, hidden: reference.embed([7])});
        assert.deepEqual(await node.forward({session: "s", startPos: 8, hidden: node.embed([7])}), want);
      } finally {
        reference.close();
      }
    } finally {
      node.close();
    }
  });
});
