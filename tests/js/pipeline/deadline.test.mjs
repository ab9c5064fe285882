// deadlineSignal (js-glue/src/pipeline/deadline.js): a fetch to a server that never answers ends
// at its deadline, or when its caller aborts, even while garbage is collected under it (which on
// Node 20 leaves a fetch under AbortSignal.any over AbortSignal.timeout pending for ever).
import assert from "node:assert/strict";
import http from "node:http";
import {after, before, describe, test} from "node:test";
import v8 from "node:v8";
import vm from "node:vm";

import {deadlineSignal} from "../../../js-glue/src/pipeline/deadline.js";

v8.setFlagsFromString("--expose-gc");
const gc = vm.runInNewContext("gc");

// How a fetch under `signal` ended ("TimeoutError", the abort reason's message), or "pending"
// if it had not within 10 s, collecting garbage every 50 ms meanwhile.
async function ending(url, signal) {
  const collector = setInterval(gc, 50);
  try {
    const ended = fetch(url, {signal}).then(() => "answered", (error) => error.name === "TimeoutError" ? error.name : error.message);
    return await Promise.race([ended, new Promise((resolve) => setTimeout(() => resolve("pending"), 10_000))]);
  } finally {
    clearInterval(collector);
  }
}

describe("deadlineSignal", () => {
  let server, url;
  before(async () => {
    server = http.createServer(() => {});  // never answers
    await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${server.address().port}/`;
  });
  after(() => {
    server.closeAllConnections();
    server.close();
  });

  test("ends a fetch nothing answers at its deadline, garbage collected or not", async () => {
    const t0 = performance.now();
    assert.equal(await ending(url, deadlineSignal(undefined, 300)), "TimeoutError");
    assert.ok(performance.now() - t0 >= 290);
    assert.equal(await ending(url, deadlineSignal(new AbortController().signal, 300)), "TimeoutError");
  });

  test("ends it when the caller aborts first, with the caller's reason", async () => {
    const caller = new AbortController();
    setTimeout(() => caller.abort(new Error("the request went away")), 200);
    assert.equal(await ending(url, deadlineSignal(caller.signal, 5_000)), "the request went away");
    const gone = new AbortController();
    gone.abort(new Error("already gone"));
    assert.equal(await ending(url, deadlineSignal(gone.signal, 5_000)), "already gone");
  });
});
