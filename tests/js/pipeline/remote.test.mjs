// Pipelines of remote layer nodes (`layerfold serve` processes on loopback) driven by the
// coordinator: the CLI through three servers, a node restarted in the middle of a generation
// (its session rebuilt by replay), a response lost on the way (answered again from the node's
// memory by the Idempotency-Key), and a node that stays down (an error naming it).
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import net from "node:net";
import {describe, test} from "node:test";

import {Pipeline} from "../../../js-glue/src/pipeline/pipeline.js";
import {model, root} from "../support/models.mjs";
import {cli, startServer} from "../support/server_process.mjs";
import {freePort, startNginx} from "../support/servers.mjs";

const file = () => model("tiny-gemma3", "tiny-gemma3");  // 3 layers
const argmax = (logits) => logits.reduce((best, x, i) => (x > logits[best] ? i : best), 0);
const bytes = (floats) => Buffer.from(floats.buffer, floats.byteOffset, floats.byteLength);

const layerfold = (...args) => spawnSync(process.execPath, [cli, ...args, "--threads", "1"], {encoding: "utf8"});

// One server per layer range ("0-0"...), each with one engine thread.
const serveLayers = (t, ranges, extra = []) => Promise.all(ranges.map((layers) => startServer(t, {args: ["--model", file(), "--layers", layers, ...extra]})));

// Greedy generation: every step's logits; between(step) runs after each step.
async function generate(pipeline, prompt, steps, between = async () => {}) {
  const logits = [];
  let input = prompt;
  for (let s = 0; s < steps; s++) {
    const out = (await pipeline.step("g", input)).logits;
    logits.push(out);
    input = [argmax(out)];
    await between(s);
  }
  return logits;
}

async function localLogits(prompt, steps) {
  const pipeline = await Pipeline.open({model: file(), build: "single"});
  try {
    return await generate(pipeline, prompt, steps);
  } finally {
    await pipeline.close();
  }
}

// A TCP proxy to `target` that cuts the connection carrying the `nth` forward request as soon
// as its response starts: the node has done the work, the coordinator never hears of it.
async function lossyProxy(target, nth) {
  const {port: targetPort} = new URL(target);
  const seen = {forwards: 0, replayed: 0};
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(targetPort), "127.0.0.1");
    let dropNextResponse = false;
    client.on("data", (chunk) => {
      const forwards = chunk.toString("latin1").match(/POST \/v1\/sessions\/[^ ]+\/forward/g)?.length ?? 0;
      for (let i = 0; i < forwards; i++) {
        seen.forwards += 1;
        if (seen.forwards === nth) dropNextResponse = true;
      }
      upstream.write(chunk);
    });
    upstream.on("data", (chunk) => {
      if (dropNextResponse) {
        client.destroy();
        upstream.destroy();
        return;
      }
      if (/x-layerfold-replayed: 1/i.test(chunk.toString("latin1"))) seen.replayed += 1;
      client.write(chunk);
    });
    for (const [a, b] of [[client, upstream], [upstream, client]]) {
      a.on("error", () => b.destroy());
      a.on("close", () => b.destroy());
    }
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {url: `http://127.0.0.1:${server.address().port}`, seen, close: () => server.close()};
}

describe("pipelines of remote layer nodes", () => {
  test("layerfold validate through three server processes equals the in-process run", async (t) => {
    const servers = await serveLayers(t, ["0-0", "1-1", "2-2"]);
    const run = (nodes) => {
      const r = layerfold("validate", "--model", file(), "--nodes", nodes, "--top-k", "10", "--json");
      assert.ok(r.status === 0 || r.status === 1, `validate failed (${r.status}): ${r.stderr}`);
      return JSON.parse(r.stdout);
    };
    const remote = run(servers.map((s) => s.url).join(","));
    const local = run("local:0-0,local:1-1,local:2-2");
    assert.deepEqual(remote.top, local.top);
    assert.deepEqual(remote.timings.nodes.map((n) => [n.layers, n.url]), servers.map((s, i) => [[i, i + 1], s.url]));
    assert.ok(remote.timings.nodes.every((n) => n.layerMs.length === 1 && n.layerMs[0] >= 0));
  });

  test("layerfold generate through two server processes continues as in-process, token for token", async (t) => {
    const servers = await serveLayers(t, ["0-1", "2-2"]);
    const run = (nodes) => {
      const r = layerfold("generate", "--model", file(), "--nodes", nodes, "--max-tokens", "6", "--json");
      assert.equal(r.status, 0, r.stderr);
      // What was generated, not how long it took.
      const {prompt, tokens, text, timings} = JSON.parse(r.stdout.trim().split("\n").at(-1));
      assert.equal(timings.predicted_n, tokens.length);
      return {prompt, tokens, text};
    };
    const remote = run(servers.map((s) => s.url).join(","));
    assert.equal(remote.tokens.length, 6);
    assert.deepEqual(remote, run("local:0-2"));
  });

  test("an unreachable node and a model URL that is not there: exit 2 and a one-line reason", async (t) => {
    const nginx = await startNginx(root);
    t.after(() => nginx.stop());
    for (const [args, reason] of [
      [["--model", file(), "--nodes", `http://127.0.0.1:${await freePort()}`], /http:\/\/127\.0\.0\.1:\d+ is unreachable \(ECONNREFUSED\)/],
      [["--model", `${nginx.url}/no/such/model.gguf`], /404/],
    ]) {
      const r = layerfold("validate", ...args);
      assert.equal(r.status, 2, r.stdout + r.stderr);
      assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
      assert.match(r.stderr, reason);
    }
  });

  test("a node restarted in the middle of a generation: its session is replayed, the output is unchanged", async (t) => {
    const prompt = [2, 40, 41, 42, 43];
    const expected = await localLogits(prompt, 8);
    const servers = await serveLayers(t, ["0-0", "1-1", "2-2"]);
    const port = new URL(servers[1].url).port;
    const pipeline = await Pipeline.open({model: file(), nodes: servers.map((s) => s.url).join(",")});
    try {
      const got = await generate(pipeline, prompt, 8, async (step) => {
        if (step !== 2) return;
        await servers[1].stop("SIGKILL");
        await startServer(t, {args: ["--model", file(), "--layers", "1-1", "--port", port]});
      });
      assert.equal(pipeline.replays, 1);
      got.forEach((logits, s) => assert.ok(bytes(logits).equals(bytes(expected[s])), `step ${s}`));
    } finally {
      await pipeline.close();
    }
  });

  test("a response lost on the way is answered again from the node's memory, not run twice", async (t) => {
    const prompt = [2, 50, 51];
    const expected = await localLogits(prompt, 4);
    const servers = await serveLayers(t, ["0-0", "1-2"]);
    const proxy = await lossyProxy(servers[1].url, 2);  // the first decode step's forward
    t.after(() => proxy.close());
    const pipeline = await Pipeline.open({model: file(), nodes: `${servers[0].url},${proxy.url}`});
    try {
      const got = await generate(pipeline, prompt, 4);
      assert.equal(proxy.seen.replayed, 1);
      assert.equal(pipeline.replays, 0);
      got.forEach((logits, s) => assert.ok(bytes(logits).equals(bytes(expected[s])), `step ${s}`));
    } finally {
      await pipeline.close();
    }
  });

  test("a node that stays down fails the step with an error naming it and its layers", async (t) => {
    const servers = await serveLayers(t, ["0-1", "2-2"]);
    const pipeline = await Pipeline.open({model: file(), nodes: servers.map((s) => s.url).join(","), nodeReadyTimeoutMs: 1000});
    try {
      await pipeline.step("s", [2, 10]);
      await servers[1].stop("SIGKILL");
      await assert.rejects(pipeline.step("s", [11]), (error) => {
        assert.match(error.message, new RegExp(`^node 1 \\(${servers[1].url.replace(/\./g, "\\.")}, layers 2-2\\): .*not ready after 1000 ms`));
        assert.equal(error.node, 1);
        return true;
      });
    } finally {
      await pipeline.close().catch(() => {});
    }
  });
});
