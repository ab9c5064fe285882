// Continuous batching (docs/batching.md): the batcher's scheduling against a scripted engine;
// then through a LayerNode on the real engine, every call's bytes the same whether it ran alone or
// in whatever batch the timing made (in every build, at 1-3 threads, on a MoE and an E-model),
// coalescing within the row budget, one bad call failing alone; then the server batching
// concurrent forwards, with its queue limits, and a DELETE that waits for a running forward.
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {LayerNode} from "../../../js-glue/src/node/layer_node.js";
import {Batcher} from "../../../js-glue/src/node/batcher.js";
import {serveConfigOf as config} from "../support/cli_config.mjs";
import {createLayerNodeApp} from "../../../js-glue/src/server/app.js";
import {serve} from "../../../js-glue/src/server/node_host.js";
import {nodeMetrics} from "../../../js-glue/src/server/metrics.js";
import {NodeState} from "../../../js-glue/src/server/node_state.js";
import {WorkQueue} from "../../../js-glue/src/server/work_queue.js";
import {relaxedSimdSupported} from "../../../js-glue/src/wasm/features.js";
import {loadSingleThreadModule, loadThreadedModule} from "../../../js-glue/src/wasm/load_node.js";
import {model} from "../support/models.mjs";
import {withNode} from "../support/nodes.mjs";

const tiny = () => model("tiny", "tiny", ["--type", "Q4_0"]);
const moe = () => model("moe-tiny", "moe-tiny", ["--type", "Q4_0"]);
const eModel = () => model("tiny-shared-kv2-q8", "tiny-shared-kv2", ["--type", "Q8_0"]);
const small = () => model("small-q8", "small", ["--type", "Q8_0"]);
const noRelaxed = !relaxedSimdSupported() && "this Node has no relaxed SIMD: scripts/test runs this file under Node 22 and 24 too";

const bytes = (f) => Buffer.from(f.buffer, f.byteOffset, f.byteLength);
const tick = () => new Promise((resolve) => setImmediate(resolve));
const OCTETS = {"content-type": "application/octet-stream"};

// A seeded generator (mulberry32), so a failing composition can be run again.
function random(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
  return {next, int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)), pick: (list) => list[Math.floor(next() * list.length)]};
}

// Exact for most sessions; the top-K FFN only on dense models (a MoE layer refuses it by name).
const APPROX = [{}, {}, {}, {truncatedAttention: true, truncationThreshold: 0.01}, {earlyExit: true, exitThreshold: 1e30, exitWindow: 1}];
const DENSE_APPROX = [...APPROX, {ffnTopK: 0.3, ffnTopKThreshold: 1}];

// Sessions of random prompts, chunks and decode steps, each joining after a random number of
// event-loop turns and leaving (its cache dropped) once done; later sessions reuse the ids.
function plan(seed, approxModes = DENSE_APPROX, count = 10) {
  const r = random(seed);
  const ids = (n) => Array.from({length: n}, () => r.int(3, 1000));
  return Array.from({length: count}, (_, s) => {
    const calls = [{tokens: ids(r.int(1, 14)), lastOnly: r.next() < 0.5}];
    for (let d = r.int(0, 5); d > 0; d--) calls.push({tokens: ids(r.next() < 0.2 ? r.int(2, 6) : 1), lastOnly: r.next() < 0.3});
    return {id: `s${s % 7}`, joinAfter: r.int(0, 8), calls, approx: r.pick(approxModes)};
  });
}

// One session's calls, awaited one after another: every output's bytes.
async function runSession(node, session) {
  const outs = [];
  let startPos = 0;
  for (const {tokens, lastOnly} of session.calls) {
    const hidden = node.embed(tokens);
    const perLayer = node.nEmbdPerLayer > 0 ? await node.perLayerInputs(tokens, hidden) : null;
    outs.push(bytes(await node.forward({session: session.id, startPos, hidden, lastOnly, approx: session.approx, perLayer})));
    startPos += tokens.length;
  }
  node.dropSession(session.id);
  return outs;
}

// Sessions with the same id run after one another in both runs, so they never share a cache.
function byId(sessions) {
  const groups = new Map();
  for (const s of sessions) groups.set(s.id, [...(groups.get(s.id) ?? []), s]);
  return [...groups.values()];
}

async function alone(node, sessions) {
  const outs = [];
  for (const s of sessions) outs.push(await runSession(node, s));
  return outs;
}

async function together(node, sessions) {
  const outs = new Map();
  await Promise.all(byId(sessions).map(async (same) => {
    for (const s of same) {
      for (let i = 0; i < s.joinAfter; i++) await tick();
      outs.set(s, await runSession(node, s));
    }
  }));
  return sessions.map((s) => outs.get(s));
}

// Runs the plans alone and together on one node: every call's bytes equal; returns the stats.
async function assertBatchInvariant(node, seeds, approxModes = DENSE_APPROX) {
  for (const seed of seeds) {
    const sessions = plan(seed, approxModes);
    const want = await alone(node, sessions);
    const before = node.batchStats();
    const got = await together(node, sessions);
    sessions.forEach((s, i) => got[i].forEach((out, c) => assert.ok(out.equals(want[i][c]),
      `seed ${seed}, session ${s.id} (approx ${JSON.stringify(s.approx)}), call ${c}: the bytes differ from the call run alone`)));
    const after = node.batchStats();
    assert.ok(after.maxEntries > 1, `seed ${seed}: no step ran more than one call (${JSON.stringify(after)})`);
    assert.ok(after.batches - before.batches < after.entries - before.entries, `seed ${seed}: as many steps as calls`);
  }
}

// A scripted engine for the batcher: records each step's calls and answers from `answer`.
function scriptedBatcher(maxRows, answer = (call) => ({value: call.session})) {
  const steps = [];
  const batches = [];
  let release = null;
  const batcher = new Batcher({
    maxRows,
    runBatch: async (calls) => {
      steps.push(calls.map((c) => `${c.session}:${c.rows}`));
      if (release) await new Promise((resolve) => release.push(resolve));
      return calls.map(answer);
    },
    onBatch: (b) => batches.push(b),
  });
  return {batcher, steps, batches, hold: () => { release = []; }, releaseOne: () => release.shift()?.(), get held() { return release?.length ?? 0; }};
}

describe("batcher scheduling", () => {
  test("calls that arrive together go in one step, in arrival order, within the row budget; a call over the budget runs alone", async () => {
    const {batcher, steps, batches} = scriptedBatcher(8);
    const results = await Promise.all([["a", 3], ["b", 3], ["c", 3], ["d", 1], ["e", 1], ["f", 9]].map(([session, rows]) => batcher.submit({session, rows})));
    assert.deepEqual(results, ["a", "b", "c", "d", "e", "f"]);
    assert.deepEqual(steps, [["a:3", "b:3"], ["c:3", "d:1", "e:1"], ["f:9"]]);
    assert.deepEqual(batches.map(({entries, rows}) => [entries, rows]), [[2, 6], [3, 5], [1, 9]]);
    for (const b of batches) {
      assert.equal(b.waitMs.length, b.entries);
      for (const ms of b.waitMs) assert.ok(ms >= 0 && Number.isFinite(ms));
    }
  });

  test("one call per session per step: a session's next call waits for the next step, others do not wait behind it", async () => {
    const {batcher, steps} = scriptedBatcher(64);
    await Promise.all([["a", 4], ["a", 1], ["b", 2], ["a", 1], ["c", 1]].map(([session, rows]) => batcher.submit({session, rows})));
    assert.deepEqual(steps, [["a:4", "b:2", "c:1"], ["a:1"], ["a:1"]]);
  });

  test("calls arriving while a step runs wait, then join the next step together (continuous batching)", async () => {
    const s = scriptedBatcher(64);
    s.hold();
    const first = s.batcher.submit({session: "a", rows: 5});
    while (s.held === 0) await tick();
    const later = ["b", "c", "a"].map((session) => s.batcher.submit({session, rows: 1}));
    await tick();
    assert.deepEqual(s.steps, [["a:5"]], "a call started a step while one was running");
    s.releaseOne();
    await first;
    while (s.held === 0) await tick();
    s.releaseOne();
    await Promise.all(later);
    assert.deepEqual(s.steps, [["a:5"], ["b:1", "c:1", "a:1"]]);
    assert.ok(s.batches[1].waitMs.every((ms) => ms > 0));
  });

  test("each call gets its own outcome; a deferred call goes back to the front; a refused step fails each of its calls", async () => {
    let deferOnce = true;
    const {batcher, steps} = scriptedBatcher(64, (call) => {
      if (call.session === "bad") return {error: new Error("bad call")};
      if (call.session === "later" && deferOnce) {
        deferOnce = false;
        return {deferred: true};
      }
      return {value: call.session};
    });
    const settled = await Promise.allSettled(["ok", "bad", "later", "next"].map((session) => batcher.submit({session, rows: 1})));
    assert.deepEqual(settled.map((r) => r.value ?? r.reason.message), ["ok", "bad call", "later", "next"]);
    assert.deepEqual(steps, [["ok:1", "bad:1", "later:1", "next:1"], ["later:1"]]);

    const failing = new Batcher({maxRows: 4, runBatch: async () => { throw new Error("engine refused the call"); }});
    const all = await Promise.allSettled([failing.submit({session: "x", rows: 1}), failing.submit({session: "y", rows: 1})]);
    assert.deepEqual(all.map((r) => r.reason?.message), ["engine refused the call", "engine refused the call"]);
  });

  test("an exclusive job runs alone, after the steps asked for before it and before those after", async () => {
    const order = [];
    const batcher = new Batcher({maxRows: 64, runBatch: async (calls) => {
      order.push(calls.map((c) => c.session).join("+"));
      return calls.map(() => ({value: null}));
    }});
    await Promise.all([batcher.submit({session: "a", rows: 1}), batcher.submit({session: "b", rows: 1}),
      batcher.exclusive(() => order.push("job")), batcher.submit({session: "c", rows: 1}), batcher.submit({session: "d", rows: 1})]);
    assert.deepEqual(order, ["a+b", "job", "c+d"]);
  });

  test("a row budget that is not a positive integer is refused by name", () => {
    for (const maxRows of [0, -1, 1.5, NaN]) {
      assert.throws(() => new Batcher({maxRows, runBatch: async () => []}), /batch row budget must be a positive integer/);
    }
  });
});

describe("batch invariance through a LayerNode", () => {
  test("tiny, single-thread (wasm32-wasi) build: concurrent random sessions give the bytes of each call alone", async () => {
    await withNode({model: tiny(), build: "single"}, (node) => assertBatchInvariant(node, [1, 2, 3]));
  });

  for (const threads of [1, 2, 3]) {
    test(`tiny, threaded build at ${threads} thread(s): concurrent random sessions give the bytes of each call alone`, async () => {
      await withNode({model: tiny(), build: "threaded", threads}, (node) => assertBatchInvariant(node, [4, 5, 6]));
    });
  }

  test("relaxed-SIMD modules (threaded at 2 threads, wasm32-wasi): the bytes of each call alone", {skip: noRelaxed}, async () => {
    await withNode({model: tiny(), lf: await loadThreadedModule({threads: 2, relaxedSimd: true})}, (node) => assertBatchInvariant(node, [7, 8]));
    await withNode({model: tiny(), lf: await loadSingleThreadModule({relaxedSimd: true})}, (node) => assertBatchInvariant(node, [9]));
  });

  test("mixture of experts (moe-tiny), single-thread and 2 threads: the bytes of each call alone", async () => {
    await withNode({model: moe(), build: "single"}, (node) => assertBatchInvariant(node, [10, 11], APPROX));
    await withNode({model: moe(), build: "threaded", threads: 2}, (node) => assertBatchInvariant(node, [12, 13], APPROX));
  });

  test("E-model (per-layer inputs, shared-KV layers), single-thread and 2 threads: the bytes of each call alone", async () => {
    await withNode({model: eModel(), build: "single"}, (node) => assertBatchInvariant(node, [14, 15]));
    await withNode({model: eModel(), build: "threaded", threads: 2}, (node) => assertBatchInvariant(node, [16, 17]));
  });

  test("batched outputs are the same bytes in every build and at every thread count", async () => {
    const sessions = plan(18);
    const want = await withNode({model: tiny(), build: "single"}, (node) => together(node, sessions));
    for (const threads of [1, 2, 3]) {
      const got = await withNode({model: tiny(), build: "threaded", threads}, (node) => together(node, sessions));
      got.forEach((outs, i) => outs.forEach((out, c) => assert.ok(out.equals(want[i][c]), `threads ${threads}, session ${i}, call ${c}`)));
    }
  });
});

describe("LayerNode batching", () => {
  const prompt = (n, seed) => Array.from({length: n}, (_, i) => 3 + ((i * 31 + seed * 17) % 900));

  for (const build of ["single", "threaded"]) {
    test(`${build}: concurrent calls are coalesced within maxBatchRows; batchStats and observeBatches report each step`, async () => {
      await withNode({model: tiny(), build, threads: 2, maxBatchRows: 8}, async (node) => {
        assert.equal(node.batchStats().maxBatchRows, 8);
        const seen = [];
        const stop = node.observeBatches((b) => seen.push(b));
        const rows = [3, 3, 3, 1, 1, 9, 2];
        await Promise.all(rows.map((n, i) => node.forward({session: `r${i}`, startPos: 0, hidden: node.embed(prompt(n, i))})));
        stop();
        await node.forward({session: "after", startPos: 0, hidden: node.embed([5])});
        assert.deepEqual(seen.map(({entries, rows: r}) => [entries, r]), [[2, 6], [3, 5], [1, 9], [1, 2]]);
        for (const b of seen) {
          assert.ok(b.rows <= 8 || b.entries === 1, `a step of ${b.entries} calls and ${b.rows} rows`);
          assert.equal(b.waitMs.length, b.entries);
        }
        assert.deepEqual(node.batchStats(), {batches: 5, entries: 8, rows: 23, maxEntries: 3, maxRows: 9, maxBatchRows: 8});
      });
    });
  }

  for (const build of ["single", "threaded"]) {
    test(`${build}: concurrent logitsAsync calls share one LM-head pass, each the bytes logits() gives; a bad row fails its own call`, async () => {
      await withNode({model: tiny(), build, threads: 2}, async (node) => {
        const hidden = await Promise.all([4, 1, 2].map((n, i) => node.forward({session: `h${i}`, startPos: 0, hidden: node.embed(prompt(n, i + 20))})));
        const want = hidden.map((h) => bytes(node.logits(h)));
        const got = await Promise.all(hidden.map((h) => node.logitsAsync(h)));
        assert.deepEqual(got.map(bytes), want);
        assert.deepEqual(node.headStats(), {passes: 1, calls: 3, rows: 7});

        const bad = new Float32Array(node.nEmbd).fill(NaN);
        const outcomes = await Promise.allSettled([node.logitsAsync(hidden[1]), node.logitsAsync(bad), node.logitsAsync(hidden[2])]);
        assert.deepEqual(outcomes.map((o) => o.status), ["fulfilled", "rejected", "fulfilled"]);
        assert.match(outcomes[1].reason.message, /hidden is not finite at row 0, element 0/);
        assert.deepEqual([bytes(outcomes[0].value), bytes(outcomes[2].value)], [want[1], want[2]]);
        await assert.rejects(node.logitsAsync(new Float32Array(node.nEmbd + 1)), /not a positive multiple of n_embd/);
      });
    });
  }

  test("a call still waiting when the node is closed is refused, saying so", async () => {
    const node = await LayerNode.open({model: tiny(), build: "single"});
    const waiting = node.forward({session: "a", startPos: 0, hidden: node.embed([3, 4])});
    const probe = node.readProbe();
    node.close();
    await assert.rejects(waiting, (e) => e.code === "failed_precondition" && /forward: the node was closed before the call could run/.test(e.message));
    await assert.rejects(probe, /readProbe: the node was closed/);
  });

  test("the row budget defaults to maxTokens, the rows the memory estimate sizes a forward for", async () => {
    await withNode({model: tiny(), build: "single", maxTokens: 64}, (node) => assert.equal(node.maxBatchRows, 64));
    await withNode({model: tiny(), build: "single"}, (node) => assert.equal(node.maxBatchRows, 512));
    await assert.rejects(LayerNode.open({model: tiny(), build: "single", maxBatchRows: 0}), /batch row budget must be a positive integer, got 0/);
  });

  for (const build of ["single", "threaded"]) {
    test(`${build}: a bad call in a batch fails alone, with the error it gets alone, and leaves its session as it was`, async () => {
      const options = {model: tiny(), build, threads: 2};
      const open = async (node) => {
        for (const id of ["a", "b", "c"]) await node.forward({session: id, startPos: 0, hidden: node.embed(prompt(3, id.charCodeAt(0)))});
      };
      const nonFinite = (node) => {
        const hidden = node.embed([7]);
        hidden[5] = NaN;
        return hidden;
      };
      const bad = (node) => ({
        stale: {session: "b", startPos: 1, hidden: node.embed([7])},
        nan: {session: "c", startPos: 3, hidden: nonFinite(node)},
        freshAt5: {session: "e", startPos: 5, hidden: node.embed([7])},
        exitState: {session: "f", startPos: 0, hidden: node.embed([7]), exitState: {exit_layer: -1, recent_updates: new Array(17).fill(0.1)}},
      });
      const good = (node) => [{session: "a", startPos: 3, hidden: node.embed([8])}, {session: "d", startPos: 0, hidden: node.embed(prompt(4, 9))}];
      // Each call alone, on a node that holds the same sessions.
      const reference = await withNode(options, async (node) => {
        await open(node);
        const errors = {};
        for (const [name, call] of Object.entries(bad(node))) errors[name] = await node.forward(call).then(() => null, (e) => ({code: e.code, message: e.message}));
        const outs = [];
        for (const call of good(node)) outs.push(bytes(await node.forward(call)));
        outs.push(bytes(await node.forward({session: "b", startPos: 3, hidden: node.embed([9])})));
        outs.push(bytes(await node.forward({session: "c", startPos: 3, hidden: node.embed([9])})));
        return {errors, outs};
      });
      for (const e of Object.values(reference.errors)) assert.ok(e && e.message.length > 0, "a bad call ran alone");
      await withNode(options, async (node) => {
        await open(node);
        const before = node.batchStats().maxEntries;
        const calls = [...good(node).slice(0, 1), ...Object.values(bad(node)), ...good(node).slice(1)];
        const settled = await Promise.allSettled(calls.map((call) => node.forward(call)));
        assert.ok(node.batchStats().maxEntries > Math.max(1, before), "the calls did not run as one batch");
        const [a, stale, nan, freshAt5, exitState, d] = settled;
        assert.ok(bytes(a.value).equals(reference.outs[0]));
        assert.ok(bytes(d.value).equals(reference.outs[1]));
        for (const [name, r] of Object.entries({stale, nan, freshAt5, exitState})) {
          assert.equal(r.status, "rejected", name);
          assert.deepEqual({code: r.reason.code, message: r.reason.message}, reference.errors[name], `${name}: not the error it gets alone`);
        }
        // The refused calls' sessions are as they were; the fresh ones that failed are not held.
        assert.deepEqual(["a", "b", "c", "d", "e", "f"].map((id) => node.sessionLength(id)), [4, 3, 3, 4, null, null]);
        assert.equal(node.info().sessions, 4);
        assert.ok(bytes(await node.forward({session: "b", startPos: 3, hidden: node.embed([9])})).equals(reference.outs[2]));
        assert.ok(bytes(await node.forward({session: "c", startPos: 3, hidden: node.embed([9])})).equals(reference.outs[3]));
      });
    });
  }

  test("new sessions beyond maxSessions in one batch: none of the batch is evicted, the extra one waits a step and evicts as it would alone", async () => {
    const calls = (node) => ["a", "b", "c"].map((id, i) => ({session: id, startPos: 0, hidden: node.embed(prompt(3, i))}));
    const want = await withNode({model: tiny(), build: "single"}, async (node) => {
      const outs = [];
      for (const call of calls(node)) outs.push(bytes(await node.forward(call)));
      return outs;
    });
    await withNode({model: tiny(), build: "threaded", threads: 2, maxSessions: 2}, async (node) => {
      const seen = [];
      node.observeBatches((b) => seen.push(b.entries));
      const outs = await Promise.all(calls(node).map((call) => node.forward(call)));
      outs.forEach((out, i) => assert.ok(bytes(out).equals(want[i]), `call ${i}`));
      assert.deepEqual(seen, [2, 1]);
      assert.deepEqual(["a", "b", "c"].map((id) => node.sessionLength(id)), [null, 3, 3]);
      await assert.rejects(node.forward({session: "a", startPos: 3, hidden: node.embed([4])}), (e) => e.code === "evicted");
    });
  });

  test("threaded: a session dropped while its step runs is freed after it; reads of it during the step wait or say why", async () => {
    await withNode({model: small(), build: "threaded", threads: 2}, async (node) => {
      await node.forward({session: "y", startPos: 0, hidden: node.embed(prompt(4, 1))});
      const x = node.forward({session: "x", startPos: 0, hidden: node.embed(prompt(96, 2))});
      const y = node.forward({session: "y", startPos: 4, hidden: node.embed([5])});
      await tick();
      await tick();
      assert.equal(node.sessionLength("y"), 4, "the positions held before the running step");
      assert.throws(() => node.layerTimings("y"), (e) => e.code === "failed_precondition" && /a forward of this session is running/.test(e.message));
      assert.equal(node.dropSession("x"), true);
      assert.equal(node.sessionLength("x"), null);
      const [outX, outY] = await Promise.all([x, y]);
      assert.equal(outX.length, 96 * node.nEmbd);
      assert.equal(outY.length, node.nEmbd);
      assert.equal(node.sessionLength("y"), 5);
      assert.equal(node.layerTimings("y").length, node.nLayer);
      assert.equal(node.info().sessions, 1);
      // A later call for the dropped id starts a new session.
      await node.forward({session: "x", startPos: 0, hidden: node.embed([3])});
      assert.equal(node.sessionLength("x"), 1);
    });
  });
});

function post(app, path, body, headers = {}) {
  return app.fetch(new Request(`http://node${path}`, {method: "POST", headers: {...OCTETS, ...headers}, body, duplex: "half"}));
}

// A node whose forwards finish only when the test releases them; it logs forwards and drops.
function heldNode() {
  const lengths = new Map();
  const releases = [];
  const log = [];
  return {
    nEmbd: 4, nVocab: 8, nLayer: 1, layers: [0, 1], withEmbedding: false, withHead: false, maxSessions: 8, maxContext: 16, metadata: {},
    forward({session, startPos, hidden}) {
      log.push(`forward ${session}@${startPos}`);
      return new Promise((resolve) => releases.push(() => {
        lengths.set(session, startPos + hidden.length / 4);
        log.push(`done ${session}@${startPos}`);
        resolve(hidden);
      }));
    },
    dropSession(id) {
      log.push(`drop ${id}`);
      return lengths.delete(id);
    },
    sessionLength: (id) => lengths.get(id) ?? null,
    sessionBytes: () => 0,
    layerTimings: () => [1],
    release: () => releases.shift()(),
    log,
    get waiting() { return releases.length; },
  };
}

const until = async (condition) => {
  for (let i = 0; i < 1000 && !condition(); i++) await tick();
  assert.ok(condition(), "timed out waiting");
};

describe("server: forwards reach the node together", () => {
  test("WorkQueue: a session's calls one at a time in order, calls of no session in one common line, the lines side by side", async () => {
    const queue = new WorkQueue(16);
    const log = [];
    const gates = new Map();
    const job = (name) => async () => {
      log.push(`start ${name}`);
      await new Promise((resolve) => gates.set(name, resolve));
      log.push(`end ${name}`);
    };
    const runs = [queue.run(job("a1"), "a"), queue.run(job("a2"), "a"), queue.run(job("b1"), "b"), queue.run(job("x1")), queue.run(job("x2"))];
    await until(() => gates.size === 3);
    assert.deepEqual(log, ["start a1", "start b1", "start x1"]);
    for (const name of ["a1", "x1", "b1"]) gates.get(name)();
    await until(() => gates.size === 5);
    gates.get("a2")();
    gates.get("x2")();
    await Promise.all(runs);
    assert.deepEqual(log.filter((l) => /a\d|x\d/.test(l)), ["start a1", "start x1", "end a1", "end x1", "start a2", "start x2", "end a2", "end x2"]);
    assert.equal(queue.pending, 0);
  });

  test("concurrent forwards of different sessions run together on the node; beyond maxQueue, 429 as before", async () => {
    const node = heldNode();
    const app = createLayerNodeApp({node, maxQueue: 2});
    const row = new Float32Array([1, 2, 3, 4]);
    const accepted = ["a", "b", "c"].map((id) => post(app, `/v1/sessions/${id}/forward?start_pos=0`, row));
    await until(() => node.waiting === 3);
    const refused = await post(app, "/v1/sessions/d/forward?start_pos=0", row);
    assert.equal(refused.status, 429);
    assert.equal((await refused.json()).error.code, "queue_full");
    assert.ok(Number(refused.headers.get("retry-after")) >= 1);
    while (node.waiting) node.release();
    for (const response of await Promise.all(accepted)) assert.equal(response.status, 200);
  });

  test("a session's calls stay in order: its next forward and its DELETE wait for its running forward, other sessions do not", async () => {
    const node = heldNode();
    const app = createLayerNodeApp({node});
    const first = post(app, "/v1/sessions/a/forward?start_pos=0", new Float32Array(8));
    await until(() => node.waiting === 1);
    const second = post(app, "/v1/sessions/a/forward?start_pos=2", new Float32Array(4));
    const other = post(app, "/v1/sessions/b/forward?start_pos=0", new Float32Array(4));
    await until(() => node.waiting === 2);
    for (let i = 0; i < 20; i++) await tick();
    assert.deepEqual(node.log, ["forward a@0", "forward b@0"], "a forward of session a overtook its running forward");
    node.release();
    assert.equal((await first).status, 200);
    await until(() => node.log.includes("forward a@2"));
    let removedStatus = null;
    const removed = app.fetch(new Request("http://node/v1/sessions/a", {method: "DELETE"})).then((r) => { removedStatus = r.status; });
    for (let i = 0; i < 20; i++) await tick();
    assert.equal(removedStatus, null, "the DELETE was answered while a forward of the session ran");
    node.release();
    node.release();
    assert.equal((await second).status, 200);
    await removed;
    assert.equal(removedStatus, 204);
    assert.equal((await other).status, 200);
    assert.deepEqual(node.log.filter((l) => l.includes(" a")), ["forward a@0", "done a@0", "forward a@2", "done a@2", "drop a"]);
  });

  test("a real node: concurrent POST forwards are batched (the metrics show it), each answer the bytes of its call alone", async () => {
    const prompts = Array.from({length: 6}, (_, i) => Array.from({length: 2 + i}, (_, j) => 3 + ((j * 13 + i * 7) % 900)));
    const want = await withNode({model: tiny(), build: "single"}, async (node) => {
      const outs = [];
      for (const [i, p] of prompts.entries()) outs.push(bytes(await node.forward({session: `p${i}`, startPos: 0, hidden: node.embed(p)})));
      return outs;
    });
    await withNode({model: tiny(), build: "threaded", threads: 2}, async (node) => {
      const state = NodeState.of(node);
      const {observer} = nodeMetrics(state, () => 0);
      const app = createLayerNodeApp({state, observer});
      const answers = await Promise.all(prompts.map((p, i) => post(app, `/v1/sessions/p${i}/forward?start_pos=0`, node.embed(p))));
      for (const [i, response] of answers.entries()) {
        assert.equal(response.status, 200);
        assert.equal(response.headers.get("x-layerfold-n-past"), String(prompts[i].length));
        assert.ok(Buffer.from(await response.arrayBuffer()).equals(want[i]), `session p${i}`);
      }
      const {text} = await observer.metrics();
      const value = (name) => Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1]);
      const steps = value("layerfold_batch_entries_count");
      assert.equal(value("layerfold_batch_entries_sum"), 6);
      assert.equal(value("layerfold_batch_rows_sum"), prompts.reduce((sum, p) => sum + p.length, 0));
      assert.ok(steps >= 1 && steps < 6, `${steps} engine steps for 6 concurrent forwards`);
      assert.equal(value("layerfold_forward_queue_wait_seconds_count"), 6);
      assert.equal(value("layerfold_batch_entries_bucket\\{le=\"1\"\\}") < steps, true, "no step ran more than one forward");
    });
  });

  test("a real node: DELETE during a running forward answers once the forward is done, which keeps its answer", async () => {
    await withNode({model: small(), build: "threaded", threads: 2}, async (node) => {
      const app = createLayerNodeApp({node});
      const tokens = Array.from({length: 96}, (_, i) => 3 + ((i * 11) % 900));
      const forward = post(app, "/v1/sessions/long/forward?start_pos=0&last_only=1", node.embed(tokens));
      await until(() => node.batchStats().batches === 0 && node.sessionLength("long") === 0);
      const removed = await app.fetch(new Request("http://node/v1/sessions/long", {method: "DELETE"}));
      assert.equal(removed.status, 204);
      const response = await forward;
      assert.equal(response.status, 200);
      assert.equal(response.headers.get("x-layerfold-n-past"), "96");
      assert.equal((await response.arrayBuffer()).byteLength, node.nEmbd * 4);
      assert.equal(node.sessionLength("long"), null);
    });
  });

  test("serve --max-batch-rows / MAX_BATCH_ROWS sets the node's row budget; 0 is refused naming where it came from", async () => {
    assert.equal(config({model: "m", "max-batch-rows": "64"}, {}).maxBatchRows, 64);
    assert.equal(config({model: "m"}, {MAX_BATCH_ROWS: "32"}).maxBatchRows, 32);
    assert.throws(() => config({model: "m"}, {MAX_BATCH_ROWS: "0"}), /MAX_BATCH_ROWS must be an integer >= 1, got "0"/);
    assert.throws(() => config({model: "m", "max-batch-rows": "0"}, {}), /--max-batch-rows must be an integer >= 1, got "0"/);
    const server = await serve({model: tiny(), build: "single", port: 0, host: "127.0.0.1", maxBatchRows: 16, log: () => {}});
    try {
      const node = await server.loaded;
      assert.equal(node.maxBatchRows, 16);
    } finally {
      await server.shutdown();
    }
  });

  test("a stalled upload still gets its 408 while other sessions' forwards run and succeed", async () => {
    await withNode({model: tiny(), build: "threaded", threads: 2}, async (node) => {
      const app = createLayerNodeApp({node, bodyTimeoutMs: 300});
      const stalled = post(app, "/v1/sessions/slow/forward?start_pos=0", new ReadableStream({pull: () => new Promise(() => {})}, {highWaterMark: 0}));
      const others = ["p", "q"].map((id) => post(app, `/v1/sessions/${id}/forward?start_pos=0`, node.embed([3, 4, 5])));
      const timedOut = await stalled;
      assert.equal(timedOut.status, 408);
      assert.equal((await timedOut.json()).error.code, "body_timeout");
      for (const response of await Promise.all(others)) assert.equal(response.status, 200);
      assert.equal(node.sessionLength("slow"), null);
    });
  });
});
