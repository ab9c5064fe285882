// The threaded build through LayerNode (docs/threads.md): a forward never blocks the event loop,
// forward calls issued together give the bytes of the same calls one after another (they are
// batched, docs/batching.md), and the output bytes are the same for every thread count and for
// the single-thread build.
import assert from "node:assert/strict";
import {execFileSync} from "node:child_process";
import path from "node:path";
import {describe, test} from "node:test";

import {readModelHeader} from "../../../js-glue/src/gguf/model_header.js";
import {model, root} from "../support/models.mjs";
import {withNode} from "../support/nodes.mjs";

const lfRun = path.join(root, "build", "native", "lf_run");
const tiny = () => model("tiny", "tiny");
const small = () => model("small-q8", "small", ["--type", "Q8_0"]);
const tokens = (n, seed = 3) => [2, ...Array.from({length: n - 1}, (_, i) => 10 + ((i * 29 + seed * 13) % 500))];
const bytes = (f) => Buffer.from(f.buffer, f.byteOffset, f.byteLength);

// A prompt, then two decode steps, all rows.
async function trace(node) {
  const ids = tokens(12);
  const out = [await node.forward({session: "s", startPos: 0, hidden: node.embed(ids)})];
  out.push(await node.forward({session: "s", startPos: 12, hidden: node.embed([7])}));
  out.push(await node.forward({session: "s", startPos: 13, hidden: node.embed([9]), lastOnly: true}));
  return Buffer.concat(out.map(bytes));
}

describe("threaded LayerNode", () => {
  test("the event loop keeps running while a long forward runs", async () => {
    await withNode({model: small(), build: "threaded", threads: 2}, async (node) => {
      const hidden = node.embed(tokens(96));
      let ticks = 0;
      const timer = setInterval(() => ticks++, 2);
      const t0 = performance.now();
      try {
        await node.forward({session: "long", startPos: 0, hidden});
      } finally {
        clearInterval(timer);
      }
      const ms = performance.now() - t0;
      // A blocked loop would run the timer at most once, after the forward.
      assert.ok(ms > 40, `forward took only ${ms.toFixed(1)} ms: too short to tell`);
      assert.ok(ticks >= 5, `${ticks} timer ticks during a ${ms.toFixed(1)} ms forward`);
    });
  });

  test("forward calls issued together give the bytes of the same calls one after another", async () => {
    const a = tokens(9, 1), b = tokens(7, 2);
    const sequential = await withNode({model: tiny(), build: "threaded", threads: 3}, async (node) => {
      const ra = await node.forward({session: "a", startPos: 0, hidden: node.embed(a)});
      const rb = await node.forward({session: "b", startPos: 0, hidden: node.embed(b)});
      const ra2 = await node.forward({session: "a", startPos: 9, hidden: node.embed([5])});
      return [ra, rb, ra2].map(bytes);
    });
    const together = await withNode({model: tiny(), build: "threaded", threads: 3}, async (node) => {
      // Same session twice in one batch: the second needs the first's positions in the cache.
      const results = await Promise.all([
        node.forward({session: "a", startPos: 0, hidden: node.embed(a)}),
        node.forward({session: "b", startPos: 0, hidden: node.embed(b)}),
        node.forward({session: "a", startPos: 9, hidden: node.embed([5])}),
      ]);
      return results.map(bytes);
    });
    together.forEach((r, i) => assert.ok(r.equals(sequential[i]), `call ${i} differs from its sequential run`));
  });

  test("a failing call in a batch rejects alone; the next calls still run", async () => {
    await withNode({model: tiny(), build: "threaded", threads: 2}, async (node) => {
      const [bad, good] = await Promise.allSettled([
        node.forward({session: "a", startPos: 5, hidden: node.embed([1])}),
        node.forward({session: "a", startPos: 0, hidden: node.embed([1, 2])}),
      ]);
      assert.equal(bad.status, "rejected");
      assert.equal(bad.reason.code, "failed_precondition");
      assert.match(bad.reason.message, /start_pos 5/);
      assert.equal(good.status, "fulfilled");
    });
  });

  test("outputs are byte-identical for threads 1, 2, 3 and the single-thread build", async () => {
    const want = await withNode({model: tiny(), build: "single"}, trace);
    for (const threads of [1, 2, 3]) {
      const got = await withNode({model: tiny(), build: "threaded", threads}, async (node) => {
        assert.equal(node.info().threads, threads);
        return trace(node);
      });
      assert.ok(got.equals(want), `threads ${threads} differs from the single-thread build`);
    }
  });

  // 20 experts, 6 used, separate gate/up, three layers; Q4_0, so the relaxed-SIMD module (Node
  // 22+) also lays the experts out in row strips. And K-quant experts of three types (gate Q4_K,
  // up Q5_K, down Q6_K) beside a Q8_0 shared MLP.
  for (const [name, preset, type] of [["moe-wide", "moe-wide", "Q4_0"], ["moe-kquant", "moe-kquant", "Q5_K"]]) {
    test(`mixture of experts: outputs are byte-identical for threads 1, 2, 3 and the single-thread build: ${name}`, async () => {
      const moe = model(name, preset, ["--type", type]);
      const want = await withNode({model: moe, build: "single"}, trace);
      for (const threads of [1, 2, 3]) {
        const got = await withNode({model: moe, build: "threaded", threads}, trace);
        assert.ok(got.equals(want), `threads ${threads} differs from the single-thread build`);
      }
    });
  }

  test("mixed K-quant MoE, native: the same bytes for 1, 2, 3, 4, 8 threads and any pipeline split", () => {
    const file = model("moe-kquant", "moe-kquant", ["--type", "Q5_K"]);
    const run = (...extra) => execFileSync(lfRun, ["--model", file, "--tokens", "2,87,124,161,198,235,272,309,346",
      "--logprobs", "--greedy", "16", ...extra], {encoding: "utf8", maxBuffer: 64 << 20});
    const want = run("--threads", "1");
    assert.ok(JSON.parse(want).logprobs.length > 0);
    for (const threads of ["2", "3", "4", "8"]) assert.equal(run("--threads", threads), want, `threads ${threads}`);
    for (const split of ["1", "2", "1,2"]) assert.equal(run("--threads", "2", "--split", split), want, `split ${split}`);
  });

  for (const [name, file] of [["tiny", tiny], ["moe-tiny", () => model("moe-tiny", "moe-tiny", ["--type", "Q4_0"])]]) {
    test(`readProbe reads the node's layer bytes once, the same bytes for every thread count: ${name}`, async () => {
      const {tensors} = await readModelHeader(file());
      const layerBytes = tensors.filter((t) => t.name.startsWith("blk.")).reduce((sum, t) => sum + t.n_bytes, 0);
      const probe = (options) => withNode({model: file(), ...options}, async (node) => {
        const result = await node.readProbe();
        assert.equal(result.bytes, layerBytes);
        assert.ok(result.ms >= 0 && Number.isFinite(result.gbPerSecond));
        return result.checksum;
      });
      const want = await probe({build: "single"});
      for (const threads of [1, 2, 3]) assert.equal(await probe({build: "threaded", threads}), want, `threads ${threads}`);
    });
  }

  test("workerTimings gives each thread's time in the last forward, barrier waits within it", async () => {
    await withNode({model: small(), build: "threaded", threads: 3}, async (node) => {
      await node.forward({session: "s", startPos: 0, hidden: node.embed(tokens(16))});
      const times = await node.workerTimings();
      assert.equal(times.length, 3);
      for (const {jobMs, barrierMs} of times) {
        assert.ok(jobMs > 0, `job ${jobMs} ms`);
        assert.ok(barrierMs >= 0 && barrierMs <= jobMs, `barrier ${barrierMs} of ${jobMs} ms`);
      }
    });
  });

  test("readProbe waits for a running forward instead of failing", async () => {
    await withNode({model: small(), build: "threaded", threads: 2}, async (node) => {
      const forward = node.forward({session: "s", startPos: 0, hidden: node.embed(tokens(64))});
      const probe = node.readProbe();
      await forward;
      assert.ok((await probe).bytes > 0);
    });
  });
});
