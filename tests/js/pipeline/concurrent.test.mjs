// Many sessions in flight through a pipeline: generations of different sessions run at once
// give exactly the tokens and logits bytes each gives alone (two and three local nodes, nodes
// that evict and replay, remote nodes); a session's own steps asked for at once run in call
// order; and the nodes overlap: node k runs one session's forward while node k+1 runs another's.
// NodeShare, which splits the sessions in flight into staggered groups, on its own.
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {NodeShare} from "../../../js-glue/src/pipeline/node_share.js";
import {Pipeline} from "../../../js-glue/src/pipeline/pipeline.js";
import {model} from "../support/models.mjs";
import {startServer} from "../support/server_process.mjs";

const tiny = () => model("tiny", "tiny", ["--type", "Q4_0"]);
const small = () => model("small-q8", "small", ["--type", "Q8_0"]);  // 6 layers
const tinyGemma3 = () => model("tiny-gemma3", "tiny-gemma3");  // 3 layers
// 5 layers, per-layer inputs (they travel with each entry), the last two reading layers 1 and 2's KV.
const sharedKv2 = () => model("tiny-shared-kv2-q8", "tiny-shared-kv2", ["--type", "Q8_0"]);
const argmax = (logits) => logits.reduce((best, x, i) => (x > logits[best] ? i : best), 0);
const bytes = (floats) => Buffer.from(floats.buffer, floats.byteOffset, floats.byteLength);

// Prompts of different lengths, so sessions are at different positions at every step.
const PROMPTS = [[2, 10, 11, 12], [2, 30, 31], [2, 7], [2, 40, 41, 42, 43, 44, 45]];

// Greedy generation of one session, its steps awaited one by one: every step's logits.
async function greedy(pipeline, session, prompt, steps) {
  const logits = [];
  let input = prompt;
  for (let s = 0; s < steps; s++) {
    const out = (await pipeline.step(session, input)).logits;
    logits.push(out);
    input = [argmax(out)];
  }
  return logits;
}

async function alone(pipeline, prompts, steps) {
  const out = [];
  for (const [i, prompt] of prompts.entries()) {
    out.push(await greedy(pipeline, `alone ${i}`, prompt, steps));
    await pipeline.dropSession(`alone ${i}`);
  }
  return out;
}

const together = (pipeline, prompts, steps) => Promise.all(prompts.map((prompt, i) => greedy(pipeline, `together ${i}`, prompt, steps)));

function assertSameLogits(got, expected) {
  for (const [i, steps] of expected.entries()) {
    assert.equal(got[i].length, steps.length);
    steps.forEach((logits, s) => assert.ok(bytes(got[i][s]).equals(bytes(logits)), `session ${i}, step ${s}: other logits bytes`));
  }
}

// Wraps each node's forward to record every call: {node, called, ended} (ms).
function recordForwards(pipeline) {
  const calls = [];
  for (const [i, node] of pipeline.nodes.entries()) {
    const forward = node.forward.bind(node);
    node.forward = (args) => {
      const call = {node: i, called: performance.now(), ended: null};
      calls.push(call);
      return forward(args).finally(() => { call.ended = performance.now(); });
    };
  }
  return calls;
}

// When node `node` had work: the union of its calls from call to answer, merged and sorted. A
// node with a call before it is running one (its own or a batch of several), whatever it does
// inside, so this is when it was busy.
function busy(calls, node) {
  const spans = calls.filter((c) => c.node === node).map((c) => [c.called, c.ended]).sort((a, b) => a[0] - b[0]);
  const merged = [];
  for (const [a, b] of spans) {
    if (merged.length > 0 && a <= merged.at(-1)[1]) merged.at(-1)[1] = Math.max(merged.at(-1)[1], b);
    else merged.push([a, b]);
  }
  return merged;
}

// The most calls node `node` had before it at once.
function mostAtOnce(calls, node) {
  const events = calls.filter((c) => c.node === node).flatMap((c) => [[c.called, 1], [c.ended, -1]]).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let now = 0;
  let most = 0;
  for (const [, change] of events) most = Math.max(most, (now += change));
  return most;
}

// Milliseconds during which node k and node k + 1 were both busy. A session's step reaches
// node k + 1 only once node k answered it, so at such a time the two nodes ran different sessions.
function bothBusyMs(calls, k) {
  let total = 0;
  for (const [a0, a1] of busy(calls, k)) {
    for (const [b0, b1] of busy(calls, k + 1)) total += Math.max(0, Math.min(a1, b1) - Math.max(a0, b0));
  }
  return total;
}

describe("sessions in flight through a pipeline", () => {
  test("generations at once through two local nodes: each one's logits bytes as alone", async () => {
    const pipeline = await Pipeline.open({model: tiny(), nodes: "local:0-0,local:1-1", build: "single"});
    try {
      const expected = await alone(pipeline, PROMPTS, 6);
      assertSameLogits(await together(pipeline, PROMPTS, 6), expected);
      assert.equal(pipeline.replays, 0);
    } finally {
      await pipeline.close();
    }
  });

  test("through three local nodes, and with nodes evicting sessions under the load: replayed per session, the same bytes", async () => {
    const open = (maxSessions) => Pipeline.open({model: small(), nodes: "local:0-1,local:2-3,local:4-5", build: "single", maxSessions});
    const roomy = await open(8);
    const cramped = await open(2);  // four sessions in flight on nodes that hold two
    try {
      const expected = await alone(roomy, PROMPTS, 5);
      assertSameLogits(await together(roomy, PROMPTS, 5), expected);
      assertSameLogits(await together(cramped, PROMPTS, 5), expected);
      assert.equal(roomy.replays, 0);
      assert.ok(cramped.replays > 0, "no node evicted a session: not a test of replay");
    } finally {
      await roomy.close();
      await cramped.close();
    }
  });

  test("a model with per-layer inputs and shared-KV layers, nodes evicting: the same bytes", async () => {
    const open = (maxSessions) => Pipeline.open({model: sharedKv2(), nodes: "local:0-0,local:1-4", build: "single", maxSessions});
    const roomy = await open(8);
    const cramped = await open(2);
    try {
      const expected = await alone(roomy, PROMPTS, 5);
      assertSameLogits(await together(roomy, PROMPTS, 5), expected);
      assertSameLogits(await together(cramped, PROMPTS, 5), expected);
      assert.ok(cramped.replays > 0, "no node evicted a session: not a test of replay");
    } finally {
      await roomy.close();
      await cramped.close();
    }
  });

  test("a session's steps asked for at once run in call order, as if each were awaited", async () => {
    const pipeline = await Pipeline.open({model: tiny(), nodes: "local:0-0,local:1-1", build: "single"});
    const inputs = [[2, 10, 11], [12], [13, 14], [15]];
    try {
      const expected = [];
      for (const input of inputs) expected.push((await pipeline.step("awaited", input)).logits);
      const got = await Promise.all(inputs.map(async (input) => (await pipeline.step("at once", input)).logits));
      got.forEach((logits, s) => assert.ok(bytes(logits).equals(bytes(expected[s])), `step ${s}`));
      // A drop asked for after a step waits for it; a step after the drop starts the session over.
      const [first] = await Promise.all([pipeline.step("dropped", inputs[0]), pipeline.dropSession("dropped")]);
      assert.ok(bytes(first.logits).equals(bytes(expected[0])));
      assert.ok(bytes((await pipeline.step("dropped", inputs[0])).logits).equals(bytes(expected[0])));
      // "awaited", "at once" and the new "dropped": the old one is freed on every node.
      assert.deepEqual(pipeline.nodes.map((node) => node.info().sessions), [3, 3]);
    } finally {
      await pipeline.close();
    }
  });

  test("the nodes overlap: node 0 runs one session's forward while node 1 runs another's (threaded build)", async (t) => {
    const open = () => Pipeline.open({model: small(), nodes: "local:0-2,local:3-5", build: "threaded", threads: 1});
    const prompts = PROMPTS.map((p, i) => [...p, ...Array.from({length: 40}, (_, j) => 50 + ((i * 37 + j * 11) % 900))]);
    const reference = await open();
    let expected;
    let aloneMs;
    try {
      const t0 = performance.now();
      expected = await alone(reference, prompts, 6);
      aloneMs = performance.now() - t0;
    } finally {
      await reference.close();
    }
    const pipeline = await open();
    try {
      const calls = recordForwards(pipeline);
      const t0 = performance.now();
      const got = await together(pipeline, prompts, 6);
      const ms = performance.now() - t0;
      assertSameLogits(got, expected);
      const overlapMs = bothBusyMs(calls, 0);
      const busyMs = busy(calls, 1).reduce((sum, [a, b]) => sum + b - a, 0);
      t.diagnostic(`${prompts.length} sessions x 6 steps: one after another ${aloneMs.toFixed(0)} ms, at once ${ms.toFixed(0)} ms; node 1 busy ${busyMs.toFixed(0)} ms, of it ${overlapMs.toFixed(0)} ms while node 0 was busy too`);
      assert.ok(overlapMs > 0, "node 0 and node 1 never ran different sessions at the same time");
    } finally {
      await pipeline.close();
    }
  });

  test("through remote nodes: generations at once give each one's bytes as alone, with requests in flight at both nodes, evicting nodes too", async (t) => {
    const servers = await Promise.all(["0-1", "2-2"].map((layers) => startServer(t, {args: ["--model", tinyGemma3(), "--layers", layers]})));
    const local = await Pipeline.open({model: tinyGemma3(), build: "single"});
    let expected;
    try {
      expected = await alone(local, PROMPTS, 5);
    } finally {
      await local.close();
    }
    const pipeline = await Pipeline.open({model: tinyGemma3(), nodes: servers.map((s) => s.url).join(",")});
    try {
      assertSameLogits(await alone(pipeline, PROMPTS, 5), expected);
      const calls = recordForwards(pipeline);
      assertSameLogits(await together(pipeline, PROMPTS, 5), expected);
      assert.ok(bothBusyMs(calls, 0) > 0, "never a request of one session at node 0 while another's was at node 1");
      // Nothing on the way (the HTTP client's connections) makes them take turns: a node's batcher sees them together.
      assert.ok(mostAtOnce(calls, 0) > 1, "never two requests at node 0 at once");
      assert.equal(pipeline.replays, 0);
    } finally {
      await pipeline.close();
    }
    // Nodes that hold two sessions, four in flight: evicted and replayed over and over, the same bytes.
    const cramped = await Promise.all(["0-1", "2-2"].map((layers) => startServer(t, {args: ["--model", tinyGemma3(), "--layers", layers, "--max-sessions", "2"]})));
    const evicting = await Pipeline.open({model: tinyGemma3(), nodes: cramped.map((s) => s.url).join(",")});
    try {
      assertSameLogits(await together(evicting, PROMPTS, 5), expected);
      assert.ok(evicting.replays > 0, "no node evicted a session: not a test of replay");
    } finally {
      await evicting.close();
    }
  });
});

describe("NodeShare", () => {
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  test("at most limit() jobs at once, the waiting ones first come first served, the limit read at every admission", async () => {
    let limit = 2;
    const share = new NodeShare(() => limit);
    let running = 0;
    let most = 0;
    const started = [];
    const job = (name, ms) => share.run(async () => {
      started.push(name);
      most = Math.max(most, ++running);
      await sleep(ms);
      running--;
      return name;
    });
    const first = [job("a", 30), job("b", 30), job("c", 5), job("d", 5), job("e", 5)];
    assert.deepEqual(started, ["a", "b"]);
    limit = 1;  // fewer sessions in flight: c, d and e then run one at a time
    assert.deepEqual(await Promise.all(first), ["a", "b", "c", "d", "e"]);
    assert.deepEqual(started, ["a", "b", "c", "d", "e"]);
    assert.equal(most, 2);
  });

  test("a job that fails gives its place back", async () => {
    const share = new NodeShare(() => 1);
    await assert.rejects(share.run(async () => { throw new Error("refused"); }), /refused/);
    assert.equal(await share.run(async () => "next"), "next");
  });
});
