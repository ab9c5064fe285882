// Approximate modes through the JS API (docs/approximate.md): off unless asked for, exact when
// their threshold allows nothing to be dropped, deterministic across threads and builds when on,
// and bad options refused by name without touching the session; switched per request over
// HTTP, per pipeline through local and remote nodes, and from the CLI.
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import {describe, test} from "node:test";

import {LayerNode} from "../../../js-glue/src/node/layer_node.js";
import {Pipeline} from "../../../js-glue/src/pipeline/pipeline.js";
import {createLayerNodeApp} from "../../../js-glue/src/server/app.js";
import {model} from "../support/models.mjs";
import {cli, startServer} from "../support/server_process.mjs";

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

describe("truncated attention, switched over HTTP, in pipelines and from the CLI", () => {
  test("HTTP: truncated_attention and truncation_threshold per request, stats in a header, bad values 400", async () => {
    const node = await LayerNode.open({model: file(), build: "single"});
    try {
      const app = createLayerNodeApp({node});
      const hidden = node.embed(PROMPT);
      const forward = (session, query) => app.fetch(new Request(`http://node/v1/sessions/${session}/forward?start_pos=0${query}`, {
        method: "POST", headers: {"content-type": "application/octet-stream"}, body: Buffer.from(hidden.buffer),
      }));
      const bytes = async (response) => {
        assert.equal(response.status, 200);
        return Buffer.from(await response.arrayBuffer());
      };
      const exact = await bytes(await forward("a", ""));
      assert.ok((await bytes(await forward("b", "&truncated_attention=1&truncation_threshold=0"))).equals(exact));
      const on = await forward("c", "&truncated_attention=1&truncation_threshold=1");
      const stats = JSON.parse(on.headers.get("x-layerfold-approx")).truncated_attention;
      assert.ok(!(await bytes(on)).equals(exact));
      assert.ok(stats.v_work_skipped > 0.2, JSON.stringify(stats));
      for (const query of ["&truncated_attention=1&truncation_threshold=2", "&truncated_attention=1&truncation_threshold=x", "&truncated_attention=yes"]) {
        const r = await forward("d", query);
        assert.equal(r.status, 400, query);
        assert.equal((await r.json()).error.code, "bad_parameter");
      }
      assert.equal(node.sessionLength("d"), null);
    } finally {
      node.close();
    }
  });

  test("a pipeline through a remote node gives the bytes and stats of the same pipeline in process", async (t) => {
    const server = await startServer(t, {args: ["--model", file(), "--layers", "3-5"]});
    const approx = truncated(1);
    const run = async (nodes) => {
      const pipeline = await Pipeline.open({model: file(), nodes, build: "single", approx});
      try {
        const {logits, timings} = await pipeline.step("s", PROMPT);
        return {bytes: Buffer.from(logits.buffer), stats: timings.map((n) => n.approx)};
      } finally {
        await pipeline.close();
      }
    };
    const local = await run("local:0-2,local:3-5");
    const remote = await run(`local:0-2,${server.url}`);
    assert.ok(remote.bytes.equals(local.bytes));
    assert.deepEqual(remote.stats, local.stats);
    assert.ok(local.stats.every((s) => s.truncated_attention.v_keys_kept < s.truncated_attention.v_keys_total));
  });

  test("layerfold validate --truncated-attention reports what it skipped; threshold 0 keeps the exact answer", () => {
    const validate = (...args) => spawnSync(process.execPath, [cli, "validate", "--model", file(), "--threads", "1", "--top-k", "5", ...args], {encoding: "utf8"});
    const exact = JSON.parse(validate("--json").stdout);
    const zero = JSON.parse(validate("--json", "--truncated-attention", "--truncation-threshold", "0").stdout);
    assert.deepEqual(zero.top, exact.top);
    assert.deepEqual(exact.approx, []);
    const on = validate("--truncated-attention", "--truncation-threshold", "1");
    assert.match(on.stdout, /approximate: truncated attention, \d+% of V work skipped, max bound [0-9.e+-]+ \(\d+ of \d+ rows truncated/);
    const bad = validate("--truncation-threshold", "0.5");
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /--truncation-threshold needs --truncated-attention/);
  });
});
