// Session limits of a LayerNode: least-recently-used eviction by count and by KV-cache bytes,
// and a clear error for a call that continues an evicted session.
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {LayerNode} from "../../../js-glue/src/node/layer_node.js";
import {model} from "../support/models.mjs";

const tiny = () => model("tiny", "tiny", ["--type", "Q4_0"]);

async function withNode(options, fn) {
  const node = await LayerNode.open({model: tiny(), build: "single", ...options});
  try {
    return await fn(node);
  } finally {
    node.close();
  }
}

const start = (node, session) => node.forward({session, startPos: 0, hidden: node.embed([2, 10, 11])});
const next = (node, session) => node.forward({session, startPos: 3, hidden: node.embed([12])});

describe("LayerNode sessions", () => {
  test("beyond maxSessions the least recently used session is evicted, with a clear error later", async () => {
    await withNode({maxSessions: 2}, async (node) => {
      await start(node, "a");
      await start(node, "b");
      await next(node, "a");        // "a" is now the most recently used
      await start(node, "c");       // evicts "b"
      assert.equal(node.info().sessions, 2);
      await assert.rejects(next(node, "b"), (e) => e.code === "evicted" && /session "b" was evicted/.test(e.message));
      // The others are intact and continue where they were.
      const fresh = await withNode({}, async (other) => {
        await start(other, "a");
        await next(other, "a");
        return other.forward({session: "a", startPos: 4, hidden: other.embed([13])});
      });
      assert.deepEqual(await node.forward({session: "a", startPos: 4, hidden: node.embed([13])}), fresh);
      await next(node, "c");
      // An evicted session can start again from position 0.
      await start(node, "b");
    });
  });

  test("maxKvBytes evicts by memory, and a limit below one session is refused at open with both numbers", async () => {
    const bytes = await withNode({}, async (node) => {
      await start(node, "probe");
      return node.info().sessions === 1 ? node.sessionBytes("probe") : 0;
    });
    assert.ok(bytes > 0);
    await withNode({maxKvBytes: bytes * 2}, async (node) => {
      await start(node, "a");
      await start(node, "b");
      await start(node, "c");        // over budget: "a" goes
      assert.equal(node.info().sessions, 2);
      await assert.rejects(next(node, "a"), (e) => e.code === "evicted");
    });
    await assert.rejects(withNode({maxKvBytes: bytes - 1}, () => {}),
      (e) => e.code === "invalid_argument" && e.message.includes(`maxKvBytes ${bytes - 1} is below the ${bytes} bytes one session's KV cache needs`));
  });
});
