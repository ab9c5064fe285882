// A tensor-parallel group as a pipeline node (--nodes tp(...)): the logits of every step and 16
// greedy tokens equal those of a pipeline of plain nodes, for groups of 1 to 4 members in this
// process and of member servers over loopback, on dense and MoE layers; a member killed
// mid-generation and started again, after which the stream goes on with the same tokens (the
// pipeline replays the session into it); a cut into the group's session in place, and one deeper
// than its rings back to its members' checkpoint (in this process and over loopback), each
// continuing with a fresh session's bytes. Groups at the pipeline's ends (the embedding and the
// head vocabulary-parallel over the members): a whole model as one group of 1 to 4, a group at
// each end, in this process and as member servers (with --ends) over loopback, dense, MoE and
// the E-model fixture. Groups across the shared-KV edge of the E-model fixture (mirroring a
// source before them, handing their sources' rows to later nodes or groups), in this process
// and over loopback. Refused by name: member servers without --ends at an end, a draft model
// on a group, bad specs.
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {Pipeline} from "../../../js-glue/src/pipeline/pipeline.js";
import {serveMember} from "../../../js-glue/src/server/member_host.js";
import {model} from "../support/models.mjs";

const small = () => model("small", "small", ["--type", "Q4_0"]);
const moeWide = () => model("moe-wide-q8", "moe-wide", ["--type", "Q8_0"]);
const sharedKv = () => model("tiny-shared-kv2-q8", "tiny-shared-kv2", ["--type", "Q8_0"]);
const PROMPT = [2, 17, 300, 5, 41, 88, 9, 120];
const STEPS = 16;
const quiet = () => {};

const argmax = (logits) => logits.reduce((best, x, i) => (x > logits[best] ? i : best), 0);
const bytesOf = (floats) => Buffer.from(floats.buffer, floats.byteOffset, floats.byteLength);

// Greedy decoding: {tokens, logits: every step's logits}. between(i): awaited before step i.
async function greedy(pipeline, {session = "g", between = async () => {}} = {}) {
  const tokens = [];
  const logits = [];
  let input = PROMPT;
  for (let i = 0; i < STEPS; ++i) {
    await between(i);
    const out = (await pipeline.step(session, input)).logits;
    logits.push(out);
    input = [argmax(out)];
    tokens.push(input[0]);
  }
  return {tokens, logits};
}

async function withPipeline(options, fn) {
  const pipeline = await Pipeline.open({build: "single", ...options});
  try {
    return await fn(pipeline);
  } finally {
    await pipeline.close();
  }
}

function assertSameRun(ours, plain, what) {
  assert.deepEqual(ours.tokens, plain.tokens, `${what}: the greedy tokens`);
  ours.logits.forEach((l, i) => assert.ok(bytesOf(l).equals(bytesOf(plain.logits[i])), `${what}: step ${i}'s logits`));
}

async function memberServers(file, layers, members, {ends = false} = {}) {
  const servers = [];
  for (let i = 0; i < members; ++i) {
    servers.push(await serveMember({model: file, layers, shard: [i, members], build: "single", port: 0, host: "127.0.0.1", ends, log: quiet}));
  }
  await Promise.all(servers.map((s) => s.loaded));
  return servers;
}

describe("a group in a pipeline gives a pipeline of plain nodes' logits and tokens", () => {
  for (const [name, file, before, range, after] of [
    ["small (dense)", small, "local:0-1", "2-4", "local:5-5"],
    ["moe-wide (MoE)", moeWide, "local:0-0", "1-1", "local:2-2"],
  ]) {
    test(`${name}, groups of 1 to 4 members in this process`, {timeout: 600_000}, async () => {
      const plain = await withPipeline({model: file(), nodes: `${before},local:${range},${after}`}, (p) => greedy(p));
      for (const members of [1, 2, 3, 4]) {
        const ours = await withPipeline({model: file(), nodes: `${before},tp(local:${range}*${members}),${after}`}, (p) => greedy(p));
        assertSameRun(ours, plain, `${members} members`);
      }
    });
  }

  test("a group of member servers over loopback, and a member killed and started again mid-generation", {timeout: 600_000}, async () => {
    const plain = await withPipeline({model: small(), nodes: "local:0-1,local:2-4,local:5-5"}, (p) => greedy(p));
    const servers = await memberServers(small(), [2, 5], 2);
    try {
      const nodes = `local:0-1,tp(${servers.map((s) => s.url).join(",")}),local:5-5`;
      assertSameRun(await withPipeline({model: small(), nodes}, (p) => greedy(p)), plain, "2 remote members");
      const restarted = await withPipeline({model: small(), nodes, memberDeadlineMs: 20_000}, async (p) => {
        const run = await greedy(p, {
          between: async (i) => {
            if (i !== 8) return;
            const port = servers[1].port;
            await servers[1].shutdown();
            servers[1] = await serveMember({model: small(), layers: [2, 5], shard: [1, 2], build: "single", port, host: "127.0.0.1", log: quiet});
            await servers[1].loaded;
          },
        });
        assert.equal(p.replays, 1, "the group's session replayed once, after the restart");
        return run;
      });
      assertSameRun(restarted, plain, "member 1 restarted after 8 tokens");
    } finally {
      await Promise.all(servers.map((s) => s.shutdown()));
    }
  });

  test("a cut into the group's session is made in place on every member", {timeout: 300_000}, async () => {
    await withPipeline({model: small(), nodes: "local:0-1,tp(local:2-4*2),local:5-5"}, async (p) => {
      const first = (await p.step("c", PROMPT)).logits;
      await p.step("c", [33, 44, 55]);
      const {rebuilt} = await p.truncate("c", PROMPT.length - 1);
      assert.deepEqual(rebuilt, []);
      const again = (await p.step("c", PROMPT.slice(-1))).logits;
      assert.ok(bytesOf(again).equals(bytesOf(first)));
    });
  });

  // The small model's sliding layers (window 16) keep rings of 16 + 64 - 1 = 79 slots: after 150
  // positions the shortest cut in place is to 86, so a cut to 70 returns to the checkpoint at 50.
  const long = Array.from({length: 150}, (_, i) => (i * 37 + 11) % 2000 + 5);
  for (const remote of [false, true]) {
    test(`a cut deeper than the rings returns the group${remote ? " of member servers" : ""} to its checkpoint, with a fresh session's bytes`, {timeout: 300_000}, async () => {
      const servers = remote ? await memberServers(small(), [2, 5], 2) : [];
      const group = remote ? `tp(${servers.map((s) => s.url).join(",")})` : "tp(local:2-4*2)";
      try {
        await withPipeline({model: small(), nodes: `local:0-1,${group},local:5-5`}, async (p) => {
          await p.step("a", long.slice(0, 50));
          assert.deepEqual(await p.checkpoint("a", {keep: 2}), [0, 1, 2]);
          await p.step("a", long.slice(50, 90));
          await p.step("a", long.slice(90, 150));
          assert.deepEqual(await p.truncate("a", 70), {nPast: 70, rebuilt: []});
          const starts = [];
          const forward = p.nodes[1].forward.bind(p.nodes[1]);
          p.nodes[1].forward = (call) => {
            starts.push(call.startPos);
            return forward(call);
          };
          const next = [7, 8, 9];
          const continued = (await p.step("a", next)).logits;
          assert.deepEqual(starts, [50, 70], "the group was fed 50..70 again from its checkpoint, then the step");
          await p.step("fresh", long.slice(0, 70));
          assert.ok(bytesOf(continued).equals(bytesOf((await p.step("fresh", next)).logits)), "the continuation's logits differ from a fresh session's");
        });
      } finally {
        await Promise.all(servers.map((s) => s.shutdown()));
      }
    });
  }
});

describe("groups at the pipeline's ends give a plain pipeline's logits and tokens", () => {
  // split: the start group's last layer (the E-model's shared-KV layers stay with their sources).
  for (const [name, file, last, split] of [["small (dense)", small, 5, 2], ["moe-wide (MoE)", moeWide, 2, 1], ["tiny-shared-kv2 (E-model)", sharedKv, 4, 0]]) {
    test(`${name}: the whole model as one group of 1 to 4, and a group at each end`, {timeout: 600_000}, async () => {
      const plain = await withPipeline({model: file(), nodes: `local:0-${last}`}, (p) => greedy(p));
      for (const members of [1, 2, 3, 4]) {
        const ours = await withPipeline({model: file(), nodes: `tp(local:0-${last}*${members})`}, (p) => greedy(p));
        assertSameRun(ours, plain, `one group of ${members}`);
      }
      const ends = await withPipeline({model: file(), nodes: `tp(local:0-${split}*2),tp(local:${split + 1}-${last}*3)`}, (p) => greedy(p));
      assertSameRun(ends, plain, "a group of 2 at the start, of 3 at the end");
    });
  }

  test("member servers with --ends over loopback: the whole model, and groups at both ends around a plain node", {timeout: 600_000}, async () => {
    const plain = await withPipeline({model: small(), nodes: "local:0-5"}, (p) => greedy(p));
    const whole = await memberServers(small(), [0, 6], 2, {ends: true});
    const first = await memberServers(small(), [0, 2], 3, {ends: true});
    const lastGroup = await memberServers(small(), [4, 6], 2, {ends: true});
    const urls = (servers) => servers.map((s) => s.url).join(",");
    try {
      assertSameRun(await withPipeline({model: small(), nodes: `tp(${urls(whole)})`}, (p) => greedy(p)), plain, "one group of 2 member servers");
      const mixed = await withPipeline({model: small(), nodes: `tp(${urls(first)}),local:2-3,tp(${urls(lastGroup)})`}, async (p) => {
        assert.match(p.nodes[0].info().build, /tensor-parallel group of 3 \(exchange members\)/);
        return greedy(p);
      });
      assertSameRun(mixed, plain, "groups of member servers at both ends");
    } finally {
      await Promise.all([...whole, ...first, ...lastGroup].map((s) => s.shutdown()));
    }
  });

  test("member servers without --ends at an end are refused by name, and so is a draft model on a group", {timeout: 300_000}, async () => {
    const servers = await memberServers(small(), [0, 2], 2);
    try {
      await assert.rejects(Pipeline.open({model: small(), nodes: `tp(${servers.map((s) => s.url).join(",")}),local:2-5`, build: "single"}),
        /tp\(.*\) is at the pipeline's start but its members hold no part of the embedding: start them with serve --ends/);
    } finally {
      await Promise.all(servers.map((s) => s.shutdown()));
    }
    await assert.rejects(Pipeline.open({model: small(), nodes: "local:0-1,tp(local:2-5*2)", build: "single", draftModel: small()}),
      /a draft model is loaded by a plain node holding the head, not by a tensor-parallel group/);
  });
});

// tiny-shared-kv2's layers are SSGSG, layer 3 reading layer 1's cache and layer 4 layer 2's.
describe("groups across the shared-KV edge give a plain pipeline's logits and tokens", () => {
  const SPLITS = [
    ["a group mirroring a source before it", "local:0-1,tp(local:2-4*2)"],
    ["a group handing its sources' rows to a node after it", "local:0-0,tp(local:1-2*3),local:3-4"],
    ["a group handing rows to a group after it", "tp(local:0-1*2),tp(local:2-4*3)"],
  ];
  test("in this process", {timeout: 600_000}, async () => {
    const plain = await withPipeline({model: sharedKv(), nodes: "local:0-4"}, (p) => greedy(p));
    for (const [what, nodes] of SPLITS) assertSameRun(await withPipeline({model: sharedKv(), nodes}, (p) => greedy(p)), plain, `${what} (${nodes})`);
  });

  test("member servers over loopback", {timeout: 600_000}, async () => {
    const plain = await withPipeline({model: sharedKv(), nodes: "local:0-4"}, (p) => greedy(p));
    const mirroring = await memberServers(sharedKv(), [2, 5], 2, {ends: true});
    const handing = await memberServers(sharedKv(), [1, 3], 3);
    const urls = (servers) => servers.map((s) => s.url).join(",");
    try {
      assertSameRun(await withPipeline({model: sharedKv(), nodes: `local:0-1,tp(${urls(mirroring)})`}, (p) => greedy(p)), plain, "member servers mirroring");
      assertSameRun(await withPipeline({model: sharedKv(), nodes: `local:0-0,tp(${urls(handing)}),local:3-4`}, (p) => greedy(p)), plain, "member servers handing out");
    } finally {
      await Promise.all([...mirroring, ...handing].map((s) => s.shutdown()));
    }
  });
});

describe("refusals", () => {
  test("a bad group spec", async () => {
    await assert.rejects(Pipeline.open({model: small(), nodes: "local:0-1,tp(local:2-4),local:5-5", build: "single"}),
      /bad node "tp\(local:2-4\)"/);
  });

  test("approximate modes on a group are refused by name", async () => {
    await withPipeline({model: small(), nodes: "local:0-1,tp(local:2-4*2),local:5-5", approx: {ffnTopK: 0.5}}, async (p) => {
      await assert.rejects(p.step("a", PROMPT), /node 1 \(tp\(local\*2\), layers 2-4\): a tensor-parallel group runs the exact engine only/);
    });
  });
});
