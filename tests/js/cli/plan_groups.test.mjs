// `layerfold plan` proposes a tensor-parallel group for a range that no single node holds within
// its budget: the fewest members that each fit, as the engine answers for each member
// (lf_member_needs_json); the first and last ranges within --end-memory, as groups holding their
// share of the embedding and the head where one node cannot. On header-only files of the 31B and
// 26B-A4B layer shapes (a 31B layer is about 280 MiB in Q4_0, more than an edge isolate's 128 MiB).
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import path from "node:path";
import {describe, test} from "node:test";

import {withModelHeader} from "../../../js-glue/src/gguf/model_header.js";
import {parseNodesSpec} from "../../../js-glue/src/pipeline/nodes_spec.js";
import {model, root} from "../support/models.mjs";

const cli = path.join(root, "js-glue", "bin", "layerfold.js");

function plan(file, args) {
  const r = spawnSync(process.execPath, [cli, "plan", file, "--json", ...args], {encoding: "utf8", timeout: 300_000});
  return {status: r.status, stderr: r.stderr, out: r.stdout ? JSON.parse(r.stdout) : null};
}

// The engine's weight bytes of each member of a group of `members` over layers [begin, end),
// with its share of the model's ends there.
const memberWeights = (file, [begin, end], members) => withModelHeader(file, {}, (lf, gguf, {info}) =>
  Array.from({length: members}, (_, i) => lf.json(lf.fn.lf_member_needs_json(gguf, begin, end, i, members, 0, 1, 0, 0,
    begin === 0 || end === info.n_layer ? 1 : 0)).tensor_bytes));

const SHAPES = [
  {name: "31b-shape-5", preset: "31b-shape", extra: ["--n-layer", "5"]},
  {name: "26b-a4b-shape-5", preset: "26b-a4b-shape", extra: ["--n-layer", "5"]},
];

describe("plan proposes groups where one node cannot hold a range", () => {
  for (const shape of SHAPES) {
    test(`${shape.name}: the fewest members that fit, the ends single within --end-memory, else groups too`, async () => {
      const file = model(`${shape.name}-header`, shape.preset, ["--header-only", ...shape.extra]);
      // Three nodes without a budget to speak of: the ranges plan balances, whatever the budget.
      const free = plan(file, ["--nodes", "3"]);
      assert.equal(free.status, 0, free.stderr);
      const [first, middle, last] = free.out.nodes;
      assert.ok(!free.out.nodes.some((nd) => nd.members), "no group within 4 GiB");
      const range = [middle.layers[0], middle.layers[1] + 1];
      // A budget under a third of the middle range's bytes: two members cannot hold it, so
      // smaller groups must be refused by their largest member.
      const memory = Math.floor(middle.bytes * 0.3);
      const endMemory = Math.max(first.bytes, last.bytes);
      const r = plan(file, ["--nodes", "3", "--memory", String(memory), "--end-memory", String(endMemory)]);
      assert.equal(r.status, 0, r.stderr);
      assert.deepEqual(r.out.nodes.map((nd) => nd.layers), free.out.nodes.map((nd) => nd.layers));
      assert.equal(r.out.nodes[0].members, undefined);
      assert.equal(r.out.nodes[2].members, undefined);
      const group = r.out.nodes[1];
      assert.ok(group.members >= 4, `members ${group.members}`);
      assert.deepEqual(group.member_bytes, await memberWeights(file, range, group.members));
      assert.ok(group.member_bytes.every((bytes) => bytes <= memory));
      assert.equal(group.bytes, Math.max(...group.member_bytes));
      assert.ok(Math.max(...await memberWeights(file, range, group.members - 1)) > memory, "one member fewer does not fit");
      assert.equal(r.out.spec, `local:${first.layers.join("-")},tp(local:${middle.layers.join("-")}*${group.members}),local:${last.layers.join("-")}`);
      assert.deepEqual(parseNodesSpec(r.out.spec)[1], {kind: "group", begin: range[0], end: range[1], members: group.members});

      // No group may be as large as needed: the range stays one node, over its budget.
      const capped = plan(file, ["--nodes", "3", "--memory", String(memory), "--end-memory", String(endMemory), "--max-members", String(group.members - 1)]);
      assert.equal(capped.status, 1);
      assert.equal(capped.out.nodes[1].members, undefined);
      assert.match(capped.stderr, /1 node\(s\) need more than their budget/);

      // Without --end-memory the ends are groups too, each member holding its share of the
      // embedding or the head within --memory.
      const ends = plan(file, ["--nodes", "3", "--memory", String(memory)]);
      assert.equal(ends.status, 0, ends.stderr);
      assert.equal(ends.out.nodes[1].members, group.members);
      for (const nd of [ends.out.nodes[0], ends.out.nodes[2]]) {
        assert.ok(nd.members >= 2, `the range ${nd.layers.join("-")} as a group`);
        const at = [nd.layers[0], nd.layers[1] + 1];
        assert.deepEqual(nd.member_bytes, await memberWeights(file, at, nd.members));
        assert.ok(nd.member_bytes.every((bytes) => bytes <= memory));
        assert.ok(Math.max(...await memberWeights(file, at, nd.members - 1)) > memory, "one member fewer does not fit");
      }
      assert.equal(parseNodesSpec(ends.out.spec).filter((entry) => entry.kind === "group").length, 3);

      // No groups at all: the ends are over the budget, said so.
      const tight = plan(file, ["--nodes", "3", "--memory", String(memory), "--max-members", "1"]);
      assert.equal(tight.status, 1);
      assert.match(tight.stderr, /a larger --max-members, or give the first and last nodes more \(--end-memory\)/);
    });
  }

  test("with --max-context each member counts its cache of its KV heads and a call's buffers", () => {
    const file = model("31b-shape-5-header", "31b-shape", ["--header-only", "--n-layer", "5"]);
    const free = plan(file, ["--nodes", "3"]);
    const middle = free.out.nodes[1];
    const memory = Math.floor(middle.bytes * 0.3);
    const weights = plan(file, ["--nodes", "3", "--memory", String(memory), "--end-memory", String(2 ** 40)]).out.nodes[1];
    const r = plan(file, ["--nodes", "3", "--memory", String(memory), "--end-memory", String(2 ** 40), "--max-context", "4096", "--max-tokens", "64"]);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.out.counts, "memory");
    const group = r.out.nodes[1];
    assert.ok(group.members >= weights.members, `${group.members} members counting memory, ${weights.members} counting weights`);
    assert.ok(group.member_bytes.every((bytes) => bytes <= memory));
    // Each member holds more than its weights once its cache and buffers count.
    if (group.members === weights.members) group.member_bytes.forEach((bytes, i) => assert.ok(bytes > weights.member_bytes[i]));
    assert.ok(group.fits_context >= 4096, `fits_context ${group.fits_context}`);
  });
});
