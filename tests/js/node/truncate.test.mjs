// Cutting a session back above the engine (docs/forward-pass.md, "Cutting a session back"): a
// cut session continues with the bytes of a session fed only the kept prefix, on a LayerNode of
// either build, through the node's HTTP API, through a two-node pipeline (local and remote) and
// after a replay; a cut the sliding ring cannot honour, or outside the session, is refused and
// changes nothing.
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {LayerNode} from "../../../js-glue/src/node/layer_node.js";
import {Pipeline} from "../../../js-glue/src/pipeline/pipeline.js";
import {createLayerNodeApp} from "../../../js-glue/src/server/app.js";
import {serve} from "../../../js-glue/src/server/node_host.js";
import {model} from "../support/models.mjs";

// gemma4, layers SG, window 4: with the default attn_chunk 64 the sliding ring holds 67 slots,
// so after 90 positions it has wrapped and the shortest cut is to 90 - 67 + 4 - 1 = 26.
const tiny = () => model("tiny", "tiny", ["--type", "Q4_0"]);
const HELD = 90;
const SHORTEST = 26;
const OCTETS = {"content-type": "application/octet-stream"};

const prompt = Array.from({length: HELD}, (_, i) => 2 + ((7 * i + 3) % 1000));
const other = [5, 17, 300, 41, 9];  // what is sent after the cut instead of the rest
const bytes = (floats) => Buffer.from(floats.buffer, floats.byteOffset, floats.byteLength);

async function withNode(build, fn) {
  const node = await LayerNode.open({model: tiny(), build, threads: build === "threaded" ? 2 : undefined});
  try {
    return await fn(node);
  } finally {
    node.close();
  }
}

// The session fed `tokens` in two forwards (the second mid-ring), as a cut session was.
async function feed(node, session, tokens) {
  await node.forward({session, startPos: 0, hidden: node.embed(tokens.slice(0, 60))});
  if (tokens.length > 60) await node.forward({session, startPos: 60, hidden: node.embed(tokens.slice(60))});
}

// Hidden states and logits of every row of `tokens` continuing the session at `at`.
async function continueAt(node, session, at, tokens) {
  const hidden = await node.forward({session, startPos: at, hidden: node.embed(tokens)});
  return {hidden: bytes(hidden), logits: bytes(node.logits(hidden))};
}

// What a fresh session fed only prompt[0, n) and then `tokens` answers.
async function freshAnswer(node, n, tokens) {
  const session = `fresh-${n}-${Math.random()}`;
  if (n > 0) await feed(node, session, prompt.slice(0, n));
  const out = await continueAt(node, session, n, tokens);
  node.dropSession(session);
  return out;
}

describe("LayerNode.truncate", () => {
  for (const build of ["single", "threaded"]) {
    test(`${build}: a cut session continues with the bytes of a fresh one fed only the prefix`, async () => {
      await withNode(build, async (node) => {
        for (const cut of [HELD, HELD - 1, 40, SHORTEST]) {
          await feed(node, "a", prompt);
          assert.equal(await node.truncate("a", cut), cut);
          assert.equal(node.sessionLength("a"), cut);
          const got = await continueAt(node, "a", cut, other);
          const expected = await freshAnswer(node, cut, other);
          assert.ok(got.hidden.equals(expected.hidden), `cut to ${cut}: hidden states`);
          assert.ok(got.logits.equals(expected.logits), `cut to ${cut}: logits`);
          node.dropSession("a");
        }
        // Before the ring wrapped, any cut is exact, to 0 included.
        await feed(node, "b", prompt.slice(0, 50));
        await node.truncate("b", 0);
        const got = await continueAt(node, "b", 0, other);
        assert.ok(got.logits.equals((await freshAnswer(node, 0, other)).logits));
      });
    });

    test(`${build}: refused cuts name the problem and leave the session as it was`, async () => {
      await withNode(build, async (node) => {
        await feed(node, "a", prompt);
        await assert.rejects(node.truncate("a", SHORTEST - 1), (e) => e.code === "failed_precondition" &&
          e.message.includes(`cannot cut a session of ${HELD} positions to ${SHORTEST - 1}`) && e.message.includes(`the shortest cut is to ${SHORTEST}`));
        await assert.rejects(node.truncate("a", HELD + 1), (e) => e.code === "invalid_argument" && e.message.includes(`must be in [0, ${HELD}]`));
        for (const bad of [-1, 1.5, 2 ** 32, NaN]) {
          await assert.rejects(node.truncate("a", bad), (e) => e.code === "invalid_argument" && e.message.includes(`not ${bad}`));
        }
        await assert.rejects(node.truncate("nobody", 0), (e) => e.code === "unknown_session" && e.message.includes('"nobody"'));
        assert.equal(node.sessionLength("a"), HELD);
        const got = await continueAt(node, "a", HELD, other);
        const expected = await freshAnswer(node, HELD, other);
        assert.ok(got.logits.equals(expected.logits), "the refused session continues where it was");
      });
    });
  }

  test("a cut asked for while the session's forward runs waits for it, and a forward after it sees the cut", async () => {
    await withNode("threaded", async (node) => {
      const running = node.forward({session: "a", startPos: 0, hidden: node.embed(prompt)});
      const cut = node.truncate("a", 40);
      const after = node.forward({session: "a", startPos: 40, hidden: node.embed(other)});
      await running;
      assert.equal(await cut, 40);
      const got = bytes(node.logits(await after));
      assert.ok(got.equals((await freshAnswer(node, 40, other)).logits));
    });
  });
});

const post = (app, path, body) => app.fetch(new Request(`http://node${path}`, {method: "POST", headers: OCTETS, body}));
const errorOf = async (response) => ({status: response.status, ...(await response.json()).error});

describe("POST /v1/sessions/:id/truncate", () => {
  test("cuts in the session's line, idempotently; refusals are 400, 404 and 409 with the engine's message", async () => {
    await withNode("single", async (node) => {
      const app = createLayerNodeApp({node});
      const forward = (session, at, tokens) => post(app, `/v1/sessions/${session}/forward?start_pos=${at}`, node.embed(tokens));
      assert.equal((await forward("a", 0, prompt)).status, 200);
      assert.equal((await forward("a", HELD, [7])).status, 200);
      const cut = await post(app, "/v1/sessions/a/truncate?n_past=40");
      assert.equal(cut.status, 200);
      assert.deepEqual(await cut.json(), {id: "a", n_past: 40});
      const again = await post(app, "/v1/sessions/a/truncate?n_past=40");
      assert.deepEqual([again.status, await again.json()], [200, {id: "a", n_past: 40}], "a repeat changes nothing");
      const continued = await forward("a", 40, other);
      assert.equal(continued.headers.get("x-layerfold-n-past"), String(40 + other.length));
      const hidden = new Float32Array(await continued.arrayBuffer());
      assert.ok(bytes(node.logits(hidden)).equals((await freshAnswer(node, 40, other)).logits));

      const held = 40 + other.length;
      const refusals = [
        ["/v1/sessions/a/truncate?n_past=1000", 400, "bad_parameter", `n_past 1000 but session "a" holds ${held} positions`],
        ["/v1/sessions/a/truncate", 400, "bad_parameter", "n_past is required"],
        ["/v1/sessions/a/truncate?n_past=-3", 400, "bad_parameter", "expected a non-negative integer"],
        ["/v1/sessions/nobody/truncate?n_past=0", 404, "unknown_session", 'session "nobody" is unknown to this node'],
      ];
      for (const [path, status, code, message] of refusals) {
        const e = await errorOf(await post(app, path));
        assert.equal(e.status, status, path);
        assert.equal(e.code, code, path);
        assert.ok(e.message.includes(message), `${path}: ${e.message}`);
      }
      assert.equal(node.sessionLength("a"), held);
      // Wrapped ring: the deepest cut is to 26 positions after 90.
      await forward("b", 0, prompt);
      const deep = await errorOf(await post(app, `/v1/sessions/b/truncate?n_past=${SHORTEST - 1}`));
      assert.deepEqual([deep.status, deep.code, deep.n_past], [409, "cut_refused", HELD]);
      assert.ok(deep.message.includes(`the shortest cut is to ${SHORTEST}`), deep.message);
      const state = await app.fetch(new Request("http://node/v1/sessions/b"));
      assert.equal((await state.json()).n_past, HELD);
      const wrong = await app.fetch(new Request("http://node/v1/sessions/b/truncate?n_past=3"));
      assert.deepEqual([wrong.status, wrong.headers.get("allow")], [405, "POST"]);
    });
  });
});

// Greedy steps of a pipeline session: each step's logits bytes.
async function steps(pipeline, session, first, count) {
  const out = [];
  let input = first;
  for (let s = 0; s < count; s++) {
    const logits = (await pipeline.step(session, input)).logits;
    out.push(bytes(logits));
    input = [logits.reduce((best, x, i) => (x > logits[best] ? i : best), 0)];
  }
  return out;
}

// What a fresh pipeline session fed prompt[0, n) then `other` and greedy steps answers.
async function freshSteps(pipeline, n, count) {
  const session = `fresh-${Math.random()}`;
  if (n > 0) await pipeline.step(session, prompt.slice(0, n));
  const out = await steps(pipeline, session, other, count);
  await pipeline.dropSession(session);
  return out;
}

async function checkCuts(pipeline) {
  for (const [cut, rebuilt] of [[40, []], [SHORTEST - 1, [0]], [0, [0]]]) {
    const session = `cut-${cut}`;
    await pipeline.step(session, prompt.slice(0, 60));
    await steps(pipeline, session, prompt.slice(60), 3);  // 90 prompt positions and 2 generated: the shortest cut is to 28
    const result = await pipeline.truncate(session, cut);
    assert.deepEqual(result, {nPast: cut, rebuilt}, `cut to ${cut}`);
    const got = await steps(pipeline, session, other, 3);
    const expected = await freshSteps(pipeline, cut, 3);
    got.forEach((logits, s) => assert.ok(logits.equals(expected[s]), `cut to ${cut}, step ${s}`));
  }
}

describe("Pipeline.truncate", () => {
  test("two local nodes: cut in place, or rebuilt from the cut history where the sliding ring refuses", async () => {
    // Node 0 holds the sliding layer (it refuses a cut below 26 and is rebuilt); node 1 the global one.
    const pipeline = await Pipeline.open({model: tiny(), nodes: "local:0-0,local:1-1", build: "single"});
    try {
      const replays = pipeline.replays;
      await checkCuts(pipeline);
      assert.equal(pipeline.replays, replays + 1, "only the refused cut's node replayed (a cut to 0 starts it afresh)");
      await pipeline.step("x", [2, 3, 4]);
      await assert.rejects(pipeline.truncate("x", 4), (e) => e.code === "invalid_argument" && e.message.includes('"x" holds 3 positions'));
      await assert.rejects(pipeline.truncate("nobody", 0), (e) => e.code === "unknown_session" && e.message.includes('"nobody"'));
      const exiting = pipeline.withApprox({earlyExit: true});
      await exiting.step("y", [2, 3, 4]);
      await assert.rejects(exiting.truncate("y", 1), (e) => e.code === "failed_precondition" && /early exit/.test(e.message));
    } finally {
      await pipeline.close();
    }
  });

  test("after a replay: nodes that lost the session rebuild the shortened one", async () => {
    const pipeline = await Pipeline.open({model: tiny(), nodes: "local:0-0,local:1-1", build: "single", maxSessions: 1});
    try {
      await pipeline.step("a", prompt.slice(0, 60));
      await steps(pipeline, "a", prompt.slice(60), 2);
      await pipeline.step("evicter", [2, 3]);  // evicts "a" on both nodes
      const replays = pipeline.replays;
      assert.deepEqual(await pipeline.truncate("a", 40), {nPast: 40, rebuilt: [0, 1]});
      const got = await steps(pipeline, "a", other, 3);
      assert.equal(pipeline.replays, replays + 2);
      const expected = await freshSteps(pipeline, 40, 3);
      got.forEach((logits, s) => assert.ok(logits.equals(expected[s]), `step ${s}`));
    } finally {
      await pipeline.close();
    }
  });

  test("a local node and a remote one: RemoteNode.truncate over HTTP", async () => {
    const served = await serve({model: tiny(), layers: [1, 2], threads: 1, port: 0, host: "127.0.0.1", log: () => {}});
    await served.loaded;
    const pipeline = await Pipeline.open({model: tiny(), nodes: `local:0-0,${served.url}`, build: "single"});
    try {
      await checkCuts(pipeline);
      const remote = pipeline.nodes[1];
      await assert.rejects(remote.truncate("nobody", 0), (e) => e.code === "unknown_session" && e.status === 404);
    } finally {
      await pipeline.close();
      await served.shutdown();
    }
  });
});
