// A short load run (correctness only; the numbers are scripts/bench-server's): many concurrent
// fresh sessions against one server with a small wait queue; every answer is the exact bytes of
// an in-process run, or a deliberate 429 with Retry-After.
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {LayerNode} from "../../../js-glue/src/node/layer_node.js";
import {model} from "../support/models.mjs";
import {loadServer} from "../support/server_load.mjs";
import {bytesOf, startServer, waitReady} from "../support/server_process.mjs";

const TOKEN = "load-token-3";

describe("layer-node server under load", () => {
  test("24 concurrent clients, queue of 4: every response correct or a deliberate 429", async (t) => {
    const file = model("tiny", "tiny", ["--type", "Q4_0"]);
    const reference = await LayerNode.open({model: file, threads: 1});
    t.after(() => reference.close());
    const hidden = reference.embed([2, 40, 41, 42]);
    const expected = bytesOf(await reference.forward({session: "r", startPos: 0, hidden}));

    const server = await startServer(t, {args: ["--model", file, "--max-queue", "4", "--max-sessions", "32"], env: {AUTH_TOKEN: TOKEN}});
    await waitReady(server.url);
    const r = await loadServer({url: server.url, token: TOKEN, hidden, expected, connections: 24, seconds: 2});
    assert.equal(r.wrong, 0, JSON.stringify(r.wrongExamples));
    assert.equal(r.errors, 0);
    assert.ok(r.ok > 0, "no request succeeded");
    assert.ok(r.refused > 0, "24 clients against a queue of 4 and no 429");
    assert.equal(r.refusedWithoutRetryAfter, 0);
    assert.equal(r.ok + r.refused, r.total);
    // The node is intact afterwards: sessions capped, and a new request still right.
    const info = await (await fetch(`${server.url}/v1/info`, {headers: {authorization: `Bearer ${TOKEN}`}})).json();
    assert.ok(info.sessions <= 32);
    assert.deepEqual(await server.stop(), {code: 0, signal: null});
  });
});
