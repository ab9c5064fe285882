// Three `layerfold serve` processes, each holding a third of a synthetic model, driven as a
// pipeline over HTTP: embed on the first, forward node to node, logits on the last; every byte
// equal to an in-process LayerNode holding all the layers.
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {LayerNode} from "../../../js-glue/src/node/layer_node.js";
import {logSoftmax, topK} from "../../../js-glue/src/tokens/logits.js";
import {model} from "../support/models.mjs";
import {bytesOf, forward, startServer, waitReady} from "../support/server_process.mjs";

const TOKEN = "pipeline-token-77";
const auth = {authorization: `Bearer ${TOKEN}`};

async function post(url, path, body, type) {
  const response = await fetch(`${url}${path}`, {method: "POST", headers: {...auth, "content-type": type}, body});
  assert.equal(response.status, 200, await response.clone().text());
  return response;
}

describe("a pipeline of three layer-node servers", () => {
  test("prompt and decode steps through three servers equal one in-process node, bit for bit", async (t) => {
    const file = model("tiny-gemma3", "tiny-gemma3");
    const servers = await Promise.all(["0-0", "1-1", "2-2"].map((layers) =>
      startServer(t, {args: ["--model", file, "--layers", layers], env: {AUTH_TOKEN: TOKEN}})));
    await Promise.all(servers.map((s) => waitReady(s.url)));
    const infos = await Promise.all(servers.map(async (s) => (await fetch(`${s.url}/v1/info`, {headers: auth})).json()));
    assert.deepEqual(infos.map((i) => [i.layers, i.has_embed, i.has_head]), [[[0, 1], true, false], [[1, 2], false, false], [[2, 3], false, true]]);
    assert.ok(infos.every((i) => i.n_layer === 3 && i.n_embd === 64 && i.threads === 1));

    const whole = await LayerNode.open({model: file, threads: 1});
    t.after(() => whole.close());
    let startPos = 0;
    for (const tokens of [[2, 17, 300, 5, 41], [77], [912]]) {
      const lastOnly = (i) => i === servers.length - 1;
      let hidden = await (await post(servers[0].url, "/v1/embed", JSON.stringify({tokens}), "application/json")).arrayBuffer();
      const expectedEmbed = whole.embed(tokens);
      assert.ok(Buffer.from(hidden).equals(bytesOf(expectedEmbed)), "embed differs");
      for (const [i, server] of servers.entries()) {
        const r = await forward(server.url, {session: "chat", startPos, hidden: new Float32Array(hidden), lastOnly: lastOnly(i), token: TOKEN});
        assert.equal(r.status, 200, JSON.stringify(r.error));
        assert.equal(r.headers.get("x-layerfold-n-past"), String(startPos + tokens.length));
        assert.equal(r.headers.get("x-layerfold-layer-ms").split(",").length, 1);
        hidden = r.bytes.buffer.slice(r.bytes.byteOffset, r.bytes.byteOffset + r.bytes.length);
      }
      const expectedHidden = await whole.forward({session: "chat", startPos, hidden: expectedEmbed, lastOnly: true});
      assert.ok(Buffer.from(hidden).equals(bytesOf(expectedHidden)), `hidden states differ at start_pos ${startPos}`);
      const logits = await (await post(servers[2].url, "/v1/logits", hidden, "application/octet-stream")).arrayBuffer();
      const expectedLogits = whole.logits(expectedHidden);
      assert.ok(Buffer.from(logits).equals(bytesOf(expectedLogits)), "logits differ");
      const top = await (await post(servers[2].url, "/v1/logits?top_k=5", hidden, "application/octet-stream")).json();
      const logProbs = logSoftmax(expectedLogits);
      assert.deepEqual(top.rows[0].top.map((x) => x.id), topK(expectedLogits, 5));
      for (const x of top.rows[0].top) {
        assert.equal(x.logit, expectedLogits[x.id]);
        assert.ok(Math.abs(x.p - Math.exp(logProbs[x.id])) < 1e-12);
      }
      startPos += tokens.length;
    }
    // Sessions are per node; deleting on each frees it there.
    for (const server of servers) {
      const held = await (await fetch(`${server.url}/v1/sessions/chat`, {headers: auth})).json();
      assert.equal(held.n_past, startPos);
      assert.ok(held.kv_bytes > 0);
      assert.equal((await fetch(`${server.url}/v1/sessions/chat`, {method: "DELETE", headers: auth})).status, 204);
      assert.equal((await fetch(`${server.url}/v1/sessions/chat`, {headers: auth})).status, 404);
    }
    const codes = await Promise.all(servers.map((s) => s.stop()));
    assert.deepEqual(codes, servers.map(() => ({code: 0, signal: null})));
  });
});
