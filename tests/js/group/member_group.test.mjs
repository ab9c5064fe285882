// A tensor-parallel group gives, call by call, the bytes one LayerNode of the same layers gives
// (a prompt, then decode steps): S members in modules of this process, in both builds, and
// members in servers of their own reached over loopback WebSockets, exchanging through the
// leader and member to member; dense gemma4 and gemma3 layers, MoE layers, the E-model fixture,
// f16 and quantized caches; K/V rows across the shared-KV edge, taken and handed out; the
// model's ends. Refusals by name: a bad member count or split, a member of another group,
// position or cache type, a wrong token, a member answering (or, member to member, sending its
// peers) NaNs, wrong lengths, a failure or nothing, a call without the K/V rows it needs; a
// refused call leaves every member's session as it was.
import assert from "node:assert/strict";
import {createRequire} from "node:module";
import path from "node:path";
import {after, before, describe, test} from "node:test";

import {MemberGroup} from "../../../js-glue/src/group/member_group.js";
import {openLocalMember} from "../../../js-glue/src/group/open_local_member.js";
import {RemoteMember} from "../../../js-glue/src/group/remote_member.js";
import {LayerNode} from "../../../js-glue/src/node/layer_node.js";
import {decodeFrame, encodeFrame} from "../../../js-glue/src/protocol/member_frames.js";
import {serveMember} from "../../../js-glue/src/server/member_host.js";
import {openSource} from "../../../js-glue/src/sources/open_source.js";
import {model, root} from "../support/models.mjs";

const {WebSocket, WebSocketServer} = createRequire(path.join(root, "js-glue", "package.json"))("ws");

const CONFIGS = [
  {name: "tiny", file: () => model("tiny", "tiny", ["--type", "Q4_0"]), layers: [0, 2]},
  {name: "tiny-gemma3, layers 1-2", file: () => model("tiny-gemma3", "tiny-gemma3", ["--type", "Q4_0"]), layers: [1, 3]},
  {name: "moe-tiny", file: () => model("moe-tiny-q8", "moe-tiny", ["--type", "Q8_0"]), layers: [0, 2]},
  // Per-layer inputs, shared-KV layers reading their sources' cache slices, one KV head per layer.
  {name: "tiny-shared-kv2", file: () => model("tiny-shared-kv2-q8", "tiny-shared-kv2", ["--type", "Q8_0"]), layers: [0, 5]},
];
const tiny = () => CONFIGS[0].file();
const PROMPT = [2, 17, 300, 5, 41, 88, 9];
const DECODE = [33, 250];
const quiet = () => {};

const bytesOf = (floats) => Buffer.from(floats.buffer, floats.byteOffset, floats.byteLength);

// The calls of the prompt and decode tokens ({startPos, hidden, perLayer}: their embeddings, and
// the range's per-layer inputs on a model with them), and one node's outputs for them, its cache
// in cache's types ({cacheTypeK, cacheTypeV}; f16 by default).
async function reference(file, [begin, end], build, cache = {}) {
  const embedder = await LayerNode.open({model: file, layers: [0, 1], build: "single"});
  const inputs = [];
  let startPos = 0;
  for (const tokens of [PROMPT, ...DECODE.map((t) => [t])]) {
    const hidden = embedder.embed(tokens);
    const nPl = embedder.nEmbdPerLayer;
    const perLayer = nPl ? (await embedder.perLayerInputs(tokens, hidden)).slice(begin * tokens.length * nPl, end * tokens.length * nPl) : null;
    inputs.push({startPos, hidden, perLayer});
    startPos += tokens.length;
  }
  embedder.close();
  const node = await LayerNode.open({model: file, layers: [begin, end], build, threads: 2, ...cache});
  try {
    const outputs = [];
    for (const input of inputs) outputs.push(await node.forward({session: "s", ...input}));
    return {inputs, outputs};
  } finally {
    node.close();
  }
}

// Runs every call through the group, holding each output to the node's bytes.
async function runCalls(group, {inputs, outputs}, what) {
  for (const [i, input] of inputs.entries()) {
    const out = await group.forward({session: "s", ...input});
    assert.ok(bytesOf(out).equals(bytesOf(outputs[i])), `${what}, call ${i}: the node's bytes`);
  }
  assert.equal(await group.sessionLength("s"), PROMPT.length + DECODE.length);
}

// Member servers of layers for a group of `members`, started on loopback ports.
async function memberServers(file, layers, members, options = {}) {
  const servers = [];
  for (let i = 0; i < members; ++i) {
    servers.push(await serveMember({model: file, layers, shard: [i, members], build: "single", port: 0, host: "127.0.0.1", log: quiet, ...options}));
  }
  await Promise.all(servers.map((s) => s.loaded));
  return servers;
}

// fn(group) over a group of `members` member servers of layers (serverOptions: serveMember's),
// connected with connectOptions; the group closed and the servers shut down after.
async function withRemoteGroup(file, layers, members, serverOptions, connectOptions, fn) {
  const servers = await memberServers(file, layers, members, serverOptions);
  try {
    const group = await MemberGroup.connect(servers.map((s) => s.url), connectOptions);
    try {
      return await fn(group);
    } finally {
      group.close();
    }
  } finally {
    await Promise.all(servers.map((s) => s.shutdown()));
  }
}

describe("a group in one process gives one node's bytes", () => {
  for (const config of CONFIGS) {
    for (const build of ["single", "threaded"]) {
      test(`${config.name}, ${build}`, {timeout: 300_000}, async () => {
        const file = config.file();
        const expected = await reference(file, config.layers, build);
        for (const members of [1, 2, 3]) {
          const group = await MemberGroup.open({model: file, layers: config.layers, members, build, threads: build === "threaded" ? 2 : 1, maxContext: 64});
          try {
            await runCalls(group, expected, `${members} members`);
            if (members > 1) assert.ok(Math.max(...group.weightBytes) < 0.8 * group.weightBytes.reduce((a, b) => a + b), "each member holds a share");
          } finally {
            group.close();
          }
        }
      });
    }
  }
});

describe("a member of the threaded build, its phases on its threads", () => {
  test("abandoned while a phase runs: the phase ends first, the call is refused 'aborted', the session as it was", async () => {
    const {inputs, outputs} = await reference(tiny(), [0, 2], "threaded");
    const source = await openSource(tiny());
    const member = await openLocalMember({source, index: 0, members: 1, layers: [0, 2], threaded: true, threads: 2, maxContext: 64});
    await source.close();
    try {
      let piece = await member.begin({session: "a", ...inputs[0]});
      const step = member.exchange([piece]);
      member.abandon();
      await assert.rejects(step, (e) => e.code === "aborted" && /member 0: the call was abandoned/.test(e.message));
      assert.equal(member.sessionLength("a"), 0);
      piece = await member.begin({session: "a", ...inputs[0]});
      let output = null;
      while (!output) ({piece, output} = await member.exchange([piece]));
      assert.ok(bytesOf(output).equals(bytesOf(outputs[0])));
    } finally {
      member.close();
    }
  });
});

describe("members with quantized caches", () => {
  const cache = {cacheTypeK: "q8_0", cacheTypeV: "q4_0"};

  test("in one process and over WebSockets: the bytes of a node with the same cache", {timeout: 300_000}, async () => {
    const config = CONFIGS[3];
    const file = config.file();
    const expected = await reference(file, config.layers, "single", cache);
    const group = await MemberGroup.open({model: file, layers: config.layers, members: 2, build: "threaded", threads: 2, maxContext: 64, ...cache});
    try {
      await runCalls(group, expected, "2 members, q8_0/q4_0");
    } finally {
      group.close();
    }
    await withRemoteGroup(file, config.layers, 2, cache, {}, (remote) => runCalls(remote, expected, "2 remote members, q8_0/q4_0"));
  });

  test("members of other cache types are not one group; a type no engine has is refused by name", async () => {
    const servers = await memberServers(tiny(), [0, 2], 2, cache);
    const other = await serveMember({model: tiny(), layers: [0, 2], shard: [1, 2], build: "single", port: 0, host: "127.0.0.1", log: quiet, cacheTypeK: "f16", cacheTypeV: "q4_0"});
    await other.loaded;
    try {
      await assert.rejects(MemberGroup.connect([servers[0].url, other.url]),
        (e) => e.code === "invalid_argument" && /member 1 \(.*\) serves layers 0-2 of width \d+ with a f16\/q4_0 cache, member 0 layers 0-2 of width \d+ with a q8_0\/q4_0 cache: not one group/.test(e.message));
    } finally {
      await Promise.all([...servers, other].map((s) => s.shutdown()));
    }
    await assert.rejects(MemberGroup.open({model: tiny(), layers: [0, 2], members: 2, build: "single", cacheTypeK: "q5_1"}),
      (e) => /q5_1/.test(e.message) && /K/.test(e.message));
  });
});

describe("cuts and checkpoints of a group", () => {
  // Members that answer a cut or checkpoint with these positions.
  const answering = (positions) => positions.map((p, index) => ({index, layers: [0, 2], nEmbd: 64, nLayer: 2, nVocab: 1024, weightBytes: 1,
    truncate: async () => p, checkpoint: async () => p, close() {}}));

  test("every member reaches one position; members that differ are refused naming them", async () => {
    assert.equal(await new MemberGroup(answering([12, 12])).truncate("s", 12), 12);
    assert.equal(await new MemberGroup(answering([40, 40, 40])).checkpoint("s", {keep: 2}), 40);
    await assert.rejects(new MemberGroup(answering([12, 8])).truncate("s", 12),
      (e) => e.code === "cut_refused" && /member 0 \(local\) at 12, member 1 \(local\) at 8/.test(e.message));
    await assert.rejects(new MemberGroup(answering([12])).truncate("s", -1), (e) => e.code === "invalid_argument" && /nPast/.test(e.message));
    await assert.rejects(new MemberGroup(answering([12])).checkpoint("s", {keep: 9}), (e) => e.code === "invalid_argument" && /keep/.test(e.message));
  });

  test("a member refuses a cut or checkpoint of a session it does not hold, by name", async () => {
    const group = await MemberGroup.open({model: tiny(), layers: [0, 2], members: 2, build: "single", maxContext: 64});
    try {
      await assert.rejects(group.truncate("nobody", 0), (e) => e.code === "unknown_session" && /member 0 holds no session "nobody"/.test(e.message));
      await assert.rejects(group.checkpoint("nobody"), (e) => e.code === "unknown_session");
    } finally {
      group.close();
    }
  });
});

describe("members counted for fewer rows than a call", () => {
  test("take the call in parts of their rows, per-layer inputs split with them: one node's bytes", {timeout: 300_000}, async () => {
    const config = CONFIGS[3];
    const file = config.file();
    const expected = await reference(file, config.layers, "single");
    const group = await MemberGroup.open({model: file, layers: config.layers, members: 2, build: "single", maxContext: 64,
      memoryBudgetBytes: 2 ** 31, maxTokens: 3});
    try {
      await runCalls(group, expected, "2 members of 3 rows, a prompt of 7");
    } finally {
      group.close();
    }
  });

  test("over a budget: refused before loading, naming the member and its bytes", async () => {
    await assert.rejects(MemberGroup.open({model: tiny(), layers: [0, 2], members: 2, build: "single", memoryBudgetBytes: 2 ** 20}),
      (e) => e.code === "over_budget" && /^member 0 of 2 over layers \[0, 2\) need \d+ bytes/.test(e.message) && e.availableBytes === 2 ** 20);
  });
});

describe("a group of member servers over loopback WebSockets gives one node's bytes", () => {
  for (const config of [CONFIGS[0], CONFIGS[2], CONFIGS[3]]) {
    test(config.name, {timeout: 300_000}, async () => {
      const file = config.file();
      const expected = await reference(file, config.layers, "single");
      for (const [members, exchange] of [[1, "leader"], [2, "leader"], [2, "members"], [3, "leader"], [3, "members"], [4, "leader"], [4, "members"]]) {
        await withRemoteGroup(file, config.layers, members, {}, {exchange}, async (group) => {
          assert.equal(group.exchange, exchange);
          await runCalls(group, expected, `${members} remote members exchanging through ${exchange === "leader" ? "the leader" : "each other"}`);
          await group.dropSession("s");
          assert.equal(await group.sessionLength("s"), 0);
        });
      }
    });
  }
});

describe("a group holding the model's ends embeds and gives logits as one node does", () => {
  const TOKENS = [0, 2, 17, 300, 5, 41, 1023, 88];
  // What one node of every layer gives: each token's embedding (and per-layer inputs), and the logits of hidden rows.
  async function nodeEnds(file) {
    const node = await LayerNode.open({model: file, build: "single"});
    try {
      const hidden = node.embed(TOKENS);
      const perLayer = node.nEmbdPerLayer ? await node.perLayerInputs(TOKENS, hidden) : null;
      return {hidden, perLayer, logits: node.logits(hidden)};
    } finally {
      node.close();
    }
  }

  async function assertEnds(group, expected, what) {
    assert.ok(group.holdsEmbedding && group.holdsHead, `${what}: holds both ends`);
    const {hidden, perLayer} = await group.embed(TOKENS);
    assert.ok(bytesOf(hidden).equals(bytesOf(expected.hidden)), `${what}: the embeddings`);
    if (expected.perLayer) assert.ok(bytesOf(perLayer).equals(bytesOf(expected.perLayer)), `${what}: the per-layer inputs`);
    else assert.equal(perLayer, null);
    assert.ok(bytesOf(await group.logits(expected.hidden)).equals(bytesOf(expected.logits)), `${what}: the logits`);
  }

  for (const config of [CONFIGS[0], CONFIGS[2], CONFIGS[3]]) {
    test(`${config.name}: members in this process and member servers`, {timeout: 300_000}, async () => {
      const file = config.file();
      const expected = await nodeEnds(file);
      for (const members of [1, 2, 3]) {
        const group = await MemberGroup.open({model: file, layers: config.layers, members, build: "single", ends: true, memoryBudgetBytes: 2 ** 31, maxTokens: 3});
        try {
          await assertEnds(group, expected, `${members} members of 3 rows`);
        } finally {
          group.close();
        }
      }
      await withRemoteGroup(file, config.layers, 2, {ends: true}, {}, (group) => assertEnds(group, expected, "2 member servers"));
    });
  }

  test("a group without its ends, and tokens outside the vocabulary, are refused by name", async () => {
    const group = await MemberGroup.open({model: tiny(), layers: [0, 2], members: 2, build: "single"});
    try {
      await assert.rejects(group.embed([1]), /the group holds no token embedding/);
      await assert.rejects(group.logits(new Float32Array(group.nEmbd)), /the group holds no head/);
    } finally {
      group.close();
    }
    const ends = await MemberGroup.open({model: tiny(), layers: [0, 2], members: 2, build: "single", ends: true});
    try {
      await assert.rejects(ends.embed([3, ends.nVocab]), /token id 1024 at position 1 is outside \[0, 1024\)/);
      await assert.rejects(ends.embed([-1]), /token id -1 at position 0/);
    } finally {
      ends.close();
    }
  });

  // Member 0 of 2 of tiny's layers with its ends (rows [0, 512)), served on loopback.
  async function firstOfTwoWithEnds() {
    const server = await serveMember({model: tiny(), layers: [0, 2], shard: [0, 2], build: "single", port: 0, host: "127.0.0.1", ends: true, log: quiet});
    await server.loaded;
    return server;
  }

  // A member 1 of 2 holding rows [512, 1024) of the ends that answers embed and logits as `answer` says.
  async function fakeEndMember(answer, vocab = [512, 1024]) {
    const wss = new WebSocketServer({port: 0, host: "127.0.0.1"});
    await new Promise((resolve) => wss.once("listening", resolve));
    wss.on("connection", (ws) => ws.on("message", (data) => {
      const {header} = decodeFrame(new Uint8Array(data), "test");
      if (header.op === "info") {
        ws.send(encodeFrame({op: "info", index: 1, members: 2, layers: [0, 2], n_embd: 64, n_layer: 2, n_vocab: 1024, weight_bytes: 1,
          cache_type_k: "f16", cache_type_v: "f16", vocab, embedding: true, head: true}));
      } else {
        answer(ws, header);
      }
    }));
    return {url: `ws://127.0.0.1:${wss.address().port}`, close: () => new Promise((resolve) => wss.close(resolve))};
  }

  for (const [what, answer, pattern] of [
    ["NaNs in its embedding", (ws, h) => ws.send(encodeFrame({op: "embedded"}, [new Float32Array(h.tokens.length * 64).fill(NaN)])),
      /member 1 \(.*\)'s embedding holds a non-finite value at 0/],
    ["an embedding of the wrong length", (ws) => ws.send(encodeFrame({op: "embedded"}, [new Float32Array(3)])),
      /member 1 \(.*\): "embedded" of 3 floats where the embedding of 1 tokens was due/],
    ["logits of the wrong length", (ws, h) => ws.send(encodeFrame({op: "logits"}, [new Float32Array(h.op === "logits" ? 7 : 64)])),
      /member 1 \(.*\): "logits" of 7 floats where the logits of 1 rows of its vocabulary rows \[512, 1024\) were due/],
  ]) {
    test(`a member answering ${what} is refused naming it`, async () => {
      const server = await firstOfTwoWithEnds();
      const fake = await fakeEndMember(answer);
      const group = await MemberGroup.connect([server.url, fake.url], {deadlineMs: 2000});
      try {
        const call = /logits/.test(what) ? group.logits(new Float32Array(64).fill(0.5)) : group.embed([700]);
        await assert.rejects(call, (e) => pattern.test(e.message));
      } finally {
        group.close();
        await fake.close();
        await server.shutdown();
      }
    });
  }

  test("members whose vocabulary rows do not tile the vocabulary are refused", async () => {
    const server = await firstOfTwoWithEnds();
    const fake = await fakeEndMember(() => {}, [600, 1024]);
    try {
      await assert.rejects(MemberGroup.connect([server.url, fake.url]),
        (e) => /member 1 \(.*\) holds vocabulary rows \[600, 1024\): the members' rows do not tile the 1024 tokens in member order/.test(e.message));
    } finally {
      await fake.close();
      await server.shutdown();
    }
  });
});

// tiny-shared-kv2's layers are SSGSG, layer 3 reading layer 1's cache and layer 4 layer 2's.
describe("a group across the shared-KV edge takes and hands out K/V rows as one node does", () => {
  // Calls of the prompt and decode tokens through node [0, 1) or [0, 2), each with the K/V rows
  // it handed out; then a node of `layers` given them: its outputs and the rows it hands out.
  async function acrossReference(file, layers) {
    const before = await LayerNode.open({model: file, layers: [0, layers[0]], build: "single"});
    const node = await LayerNode.open({model: file, layers, build: "single"});
    try {
      const calls = [];
      let startPos = 0;
      for (const tokens of [PROMPT, ...DECODE.map((t) => [t])]) {
        const x = before.embed(tokens);
        const nPl = before.nEmbdPerLayer;
        const all = await before.perLayerInputs(tokens, x);
        const perLayer = (from, to) => all.slice(from * tokens.length * nPl, to * tokens.length * nPl);
        const hidden = await before.forward({session: "s", startPos, hidden: x, perLayer: perLayer(0, layers[0])});
        const kvRows = before.kvRowsOf(hidden) ?? {};
        const call = {startPos, hidden, perLayer: perLayer(...layers), kvRows};
        const out = await node.forward({session: "s", ...call});
        calls.push({call, out, handedOut: node.kvRowsOf(out)});
        startPos += tokens.length;
      }
      return calls;
    } finally {
      before.close();
      node.close();
    }
  }

  async function assertAcross(group, calls, what) {
    for (const [i, {call, out, handedOut}] of calls.entries()) {
      const got = await group.forward({session: "s", ...call});
      assert.ok(bytesOf(got).equals(bytesOf(out)), `${what}, call ${i}: the node's output`);
      if (!handedOut) assert.equal(group.kvRowsOf(got), null);
      else for (const [layer, rows] of Object.entries(handedOut)) assert.ok(Buffer.from(group.kvRowsOf(got)[layer]).equals(Buffer.from(rows)), `${what}, call ${i}: layer ${layer}'s rows`);
    }
  }

  const sharedKv = () => CONFIGS[3].file();
  for (const [name, layers] of [["mirroring layer 1 (layers 2-4)", [2, 5]], ["handing out layers 1 and 2 (layers 1-2)", [1, 3]]]) {
    test(`${name}: in this process and over loopback, through the leader and member to member`, {timeout: 300_000}, async () => {
      const calls = await acrossReference(sharedKv(), layers);
      for (const members of [1, 2, 3]) {
        const group = await MemberGroup.open({model: sharedKv(), layers, members, build: "single", maxContext: 64, memoryBudgetBytes: 2 ** 31, maxTokens: 3});
        try {
          await assertAcross(group, calls, `${members} members of 3 rows`);
        } finally {
          group.close();
        }
      }
      for (const exchange of ["leader", "members"]) {
        await withRemoteGroup(sharedKv(), layers, 2, {}, {exchange}, (group) => assertAcross(group, calls, `2 member servers, exchange ${exchange}`));
      }
    });
  }

  test("a call without the rows the group reads is refused naming the layer, every session as it was", async () => {
    const [{call}] = await acrossReference(sharedKv(), [2, 5]);
    const group = await MemberGroup.open({model: sharedKv(), layers: [2, 5], members: 2, build: "single", maxContext: 64});
    try {
      await assert.rejects(group.forward({session: "k", ...call, kvRows: {}}), /layers 2-4 read layer 1's KV cache: its K\/V rows of the call's positions are missing/);
      const short = {1: call.kvRows[1].subarray(0, call.kvRows[1].byteLength / 2)};
      await assert.rejects(group.forward({session: "k", ...call, kvRows: short}), /layer 1's KV cache: its K\/V rows of the call's positions are missing or short/);
      assert.equal(await group.sessionLength("k"), 0);
    } finally {
      group.close();
    }
  });
});

describe("a member server's shutdown", () => {
  test("lets the call under way end, refuses new leaders meanwhile, then closes", {timeout: 120_000}, async () => {
    const {inputs, outputs} = await reference(tiny(), [0, 2], "single");
    const [server] = await memberServers(tiny(), [0, 2], 1);
    const member = await RemoteMember.connect(server.url, {index: 0, members: 1});
    try {
      let piece = await member.begin({session: "d", ...inputs[0]});
      const shutdown = server.shutdown();
      await assert.rejects(RemoteMember.connect(server.url, {index: 0, members: 1}), (e) => e.code === "unavailable");
      let output = null;
      while (!output) ({piece, output} = await member.exchange([piece]));
      assert.ok(bytesOf(output).equals(bytesOf(outputs[0])));
      assert.equal(await shutdown, 0, "no call abandoned");
      await assert.rejects(member.begin({session: "d", ...inputs[1]}), (e) => /closed the connection/.test(e.message));
    } finally {
      member.close();
    }
  });
});

describe("refusals", () => {
  test("a member count that is not a whole number", async () => {
    await assert.rejects(MemberGroup.open({model: tiny(), layers: [0, 2], members: 0, build: "single"}),
      (e) => e.code === "invalid_argument" && /members must be a whole number >= 1, not 0/.test(e.message));
  });

  test("a call at the wrong position or with a non-finite row is refused and leaves every member's session as it was", async () => {
    const {inputs, outputs} = await reference(tiny(), [0, 2], "single");
    const group = await MemberGroup.open({model: tiny(), layers: [0, 2], members: 2, build: "single", maxContext: 64});
    try {
      await group.forward({session: "s", ...inputs[0]});
      await assert.rejects(group.forward({session: "s", startPos: 3, hidden: inputs[1].hidden}), (e) => /start_pos|position/.test(e.message));
      const bad = Float32Array.from(inputs[1].hidden);
      bad[5] = NaN;
      await assert.rejects(group.forward({session: "s", startPos: PROMPT.length, hidden: bad}), (e) => /finite/.test(e.message));
      assert.equal(await group.sessionLength("s"), PROMPT.length);
      const out = await group.forward({session: "s", startPos: PROMPT.length, hidden: inputs[1].hidden});
      assert.ok(bytesOf(out).equals(bytesOf(outputs[1])));
      await assert.rejects(group.forward({session: "s", startPos: 0, hidden: new Float32Array(5)}), RangeError);
    } finally {
      group.close();
    }
  });

  describe("remote members", () => {
    let servers;
    before(async () => {
      servers = await memberServers(tiny(), [0, 2], 2, {authToken: "member-secret-token"});
    });
    after(async () => {
      await Promise.all(servers.map((s) => s.shutdown()));
    });

    test("a wrong or missing token, members out of order, a member of another group size", async () => {
      const urls = servers.map((s) => s.url);
      await assert.rejects(MemberGroup.connect(urls, {authToken: "wrong"}),
        (e) => e.code === "unauthenticated" && /member 0 .*HTTP 401/.test(e.message) && !/member-secret-token/.test(e.message));
      await assert.rejects(MemberGroup.connect(urls), (e) => e.code === "unauthenticated");
      await assert.rejects(MemberGroup.connect([urls[1], urls[0]], {authToken: "member-secret-token"}),
        (e) => /member 0 \(.*\) is member 1 of 2, not 0 of 2/.test(e.message));
      await assert.rejects(MemberGroup.connect([urls[0]], {authToken: "member-secret-token"}), (e) => /is member 0 of 2, not 0 of 1/.test(e.message));
    });

    test("a refused call over the wire leaves both members' sessions as they were", async () => {
      const {inputs, outputs} = await reference(tiny(), [0, 2], "single");
      const group = await MemberGroup.connect(servers.map((s) => s.url), {authToken: "member-secret-token"});
      try {
        await group.forward({session: "r", ...inputs[0]});
        await assert.rejects(group.forward({session: "r", ...inputs[1], startPos: 1}), (e) => /member 0/.test(e.message));
        const out = await group.forward({session: "r", ...inputs[1]});
        assert.ok(bytesOf(out).equals(bytesOf(outputs[1])));
      } finally {
        group.close();
      }
    });

    // A member server that answers info as member 1 of 2 and then each frame as `misbehave` says.
    async function fakeMember(misbehave) {
      const wss = new WebSocketServer({port: 0, host: "127.0.0.1"});
      await new Promise((resolve) => wss.once("listening", resolve));
      wss.on("connection", (ws) => ws.on("message", (data) => {
        const {header} = decodeFrame(new Uint8Array(data), "test");
        if (header.op === "info") ws.send(encodeFrame({op: "info", index: 1, members: 2, layers: [0, 2], n_embd: 64, n_layer: 2, n_vocab: 1024, weight_bytes: 1,
          cache_type_k: "f16", cache_type_v: "f16"}));
        else if (header.op === "abandon") ws.send(encodeFrame({op: "ok"}));
        else misbehave(ws, header);
      }));
      return {url: `ws://127.0.0.1:${wss.address().port}`, close: () => new Promise((resolve) => wss.close(resolve))};
    }

    const INFO = {op: "info", index: 1, members: 2, layers: [0, 2], n_embd: 64, n_layer: 2, n_vocab: 1024, weight_bytes: 1, cache_type_k: "f16", cache_type_v: "f16"};

    // The one answer frame to `frame`, sent on a new connection to a member server's /v1/member.
    async function askMember(url, frame) {
      const ws = new WebSocket(`${url.replace("http:", "ws:")}/v1/member`, {headers: {authorization: "Bearer member-secret-token"}});
      await new Promise((resolve, reject) => { ws.once("open", resolve); ws.once("error", reject); });
      ws.send(frame);
      const [data] = await new Promise((resolve) => ws.once("message", (...args) => resolve(args)));
      return {ws, header: decodeFrame(new Uint8Array(data), "test").header};
    }

    // A member 1 that can exchange member to member: it links itself to member 0 when given its
    // peers (or says it could not reach linkTo), and on a call does what `misbehave(link, call,
    // leader)` says.
    async function fakePeer(misbehave, {linkTo} = {}) {
      const wss = new WebSocketServer({port: 0, host: "127.0.0.1"});
      await new Promise((resolve) => wss.once("listening", resolve));
      let link = null;
      wss.on("connection", (ws) => ws.on("message", async (data) => {
        const {header} = decodeFrame(new Uint8Array(data), "test");
        if (header.op === "info") ws.send(encodeFrame({...INFO, member_exchange: true}));
        else if (header.op === "hello") ws.send(encodeFrame({op: "ok"}));
        else if (header.op === "peers" && linkTo) ws.send(encodeFrame({op: "error", code: "unavailable", message: `could not reach member 0 (${linkTo})`}));
        else if (header.op === "peers") {
          const said = await askMember(header.urls[0], encodeFrame({op: "hello", index: 1, members: 2, layers: [0, 2]}));
          assert.equal(said.header.op, "ok");
          link = said.ws;
          ws.send(encodeFrame({op: "ok"}));
        } else if (header.op === "begin") misbehave(link, header.call, ws);
      }));
      const close = () => {
        link?.terminate();
        for (const ws of wss.clients) ws.terminate();
        return new Promise((resolve) => wss.close(resolve));
      };
      return {url: `ws://127.0.0.1:${wss.address().port}`, close};
    }

    const piece = (call, floats) => encodeFrame({op: "piece", call, phase: 0, from: 1}, [floats]);
    const done = (leader) => leader.send(encodeFrame({op: "done"}));
    for (const [what, misbehave, pattern] of [
      ["NaNs in its piece", (link, call, leader) => { link.send(piece(call, new Float32Array([1, NaN, 2]))); done(leader); },
        /member 0 \(.*\): member 1's piece holds a non-finite value at 1/],
      ["a piece of the wrong length", (link, call, leader) => { link.send(piece(call, new Float32Array(3))); done(leader); },
        /piece of member 1 in layer 0 has 3 floats, expected/],
      ["no piece, past the deadline", (link, call, leader) => done(leader), /member 0 \(.*\): member 1 sent no piece of layer 0's attention within 300 ms/],
      ["a failure", (link, call, leader) => {
        link.send(encodeFrame({op: "fail", call, from: 1, message: "its disk is on fire"}));
        leader.send(encodeFrame({op: "error", code: "internal", message: "its disk is on fire"}));
      }, /member 1 \(.*\): its disk is on fire/],
    ]) {
      test(`exchanging member to member, a member sending ${what} fails the call naming it; the good member's session stays as it was`, async () => {
        const {inputs, outputs} = await reference(tiny(), [0, 2], "single");
        const fake = await fakePeer(misbehave);
        const group = await MemberGroup.connect([servers[0].url, fake.url], {authToken: "member-secret-token", deadlineMs: 300, exchange: "members"});
        try {
          await assert.rejects(group.forward({session: "p", ...inputs[0]}), (e) => pattern.test(e.message));
          assert.equal(await group.sessionLength("p"), 0);
        } finally {
          group.close();
          await fake.close();
        }
        const good = await MemberGroup.connect(servers.map((s) => s.url), {authToken: "member-secret-token", exchange: "members"});
        try {
          assert.ok(bytesOf(await good.forward({session: "p", ...inputs[0]})).equals(bytesOf(outputs[0])), "member 0 takes the next call");
          await good.dropSession("p");
        } finally {
          good.close();
        }
      });
    }

    test("a leader that goes away mid-call, exchanging member to member: the members abandon it", async () => {
      const {inputs, outputs} = await reference(tiny(), [0, 2], "single");
      const fake = await fakePeer(() => {});
      const group = await MemberGroup.connect([servers[0].url, fake.url], {authToken: "member-secret-token", deadlineMs: 60_000, exchange: "members"});
      const call = group.forward({session: "g", ...inputs[0]});
      await new Promise((resolve) => setTimeout(resolve, 200));
      group.close();
      await assert.rejects(call, (e) => /closed/.test(e.message));
      // member 1 still linked and silent: only the leader's going frees member 0
      const good = await MemberGroup.connect(servers.map((s) => s.url), {authToken: "member-secret-token", exchange: "members"});
      try {
        assert.equal(await good.sessionLength("g"), 0);
        assert.ok(bytesOf(await good.forward({session: "g", ...inputs[0]})).equals(bytesOf(outputs[0])));
        await good.dropSession("g");
      } finally {
        good.close();
        await fake.close();
      }
    });

    test("a hello from a member of another group, peers that are not URLs, and member to member with a member that cannot, are refused by name", async () => {
      const {ws, header} = await askMember(servers[0].url, encodeFrame({op: "hello", index: 1, members: 3, layers: [0, 2]}));
      ws.terminate();
      assert.equal(header.op, "error");
      assert.match(header.message, /member 0 of 2 over layers 0-2: a hello from member 1 of 3 over layers 0-2 is not one of its group/);
      const peers = await askMember(servers[0].url, encodeFrame({op: "peers", urls: ["file:///etc/passwd", servers[1].url]}));
      peers.ws.terminate();
      assert.match(peers.header.message, /peers must be the http\(s\) or ws\(s\) URLs of all 2 members, in member order/);
      const fake = await fakeMember(() => {});
      try {
        await assert.rejects(MemberGroup.connect([servers[0].url, fake.url], {authToken: "member-secret-token", exchange: "members"}),
          (e) => /member 1 \(.*\) exchanges through its leader only/.test(e.message));
        await assert.rejects(MemberGroup.connect([servers[0].url, fake.url], {exchange: "ring"}), (e) => /exchange must be auto, members or leader/.test(e.message));
        const group = await MemberGroup.connect([servers[0].url, fake.url], {authToken: "member-secret-token"});
        assert.equal(group.exchange, "leader", "auto: through the leader where a member cannot");
        group.close();
      } finally {
        await fake.close();
      }
      // Members that cannot reach each other at the leader's URLs: through the leader, saying why.
      const cut = await fakePeer(() => {}, {linkTo: "http://127.0.0.1:9"});
      try {
        await assert.rejects(MemberGroup.connect([servers[0].url, cut.url], {authToken: "member-secret-token", exchange: "members"}),
          (e) => /could not reach member 0/.test(e.message));
        const group = await MemberGroup.connect([servers[0].url, cut.url], {authToken: "member-secret-token"});
        assert.equal(group.exchange, "leader");
        assert.match(group.linkFailure, /could not reach member 0/);
        group.close();
      } finally {
        await cut.close();
      }
    });

    for (const [what, misbehave, pattern] of [
      ["NaNs in its piece", (ws) => ws.send(encodeFrame({op: "piece"}, [new Float32Array([1, NaN, 2])])), /member 1 \(.*\)'s piece holds a non-finite value at 1/],
      ["a piece of the wrong length", (ws) => ws.send(encodeFrame({op: "piece"}, [new Float32Array(3)])), /piece of member 1 in layer 0 has 3 floats, expected/],
      ["a frame that is not one", (ws) => ws.send(new Uint8Array([1, 2])), /member 1 \(.*\): a frame shorter than its header length/],
      ["nothing, past the deadline", () => {}, /member 1 \(.*\) did not answer begin within 300 ms/],
    ]) {
      test(`a member answering ${what} fails the call naming it, and the good member's session stays as it was`, async () => {
        const {inputs} = await reference(tiny(), [0, 2], "single");
        const fake = await fakeMember(misbehave);
        const group = await MemberGroup.connect([servers[0].url, fake.url], {authToken: "member-secret-token", deadlineMs: 300});
        try {
          await assert.rejects(group.forward({session: "f", ...inputs[0]}), (e) => pattern.test(e.message));
          assert.equal(await group.sessionLength("f"), 0);
        } finally {
          group.close();
          await fake.close();
        }
      });
    }
  });
});
