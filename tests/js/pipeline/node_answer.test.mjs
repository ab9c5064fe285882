// What a remote node's answer may be (js-glue/src/pipeline/node_answer.js), on hand-made
// Responses whose bodies count what was pulled from them: a wrong Content-Length is refused
// before a byte is read, a body without one is cancelled as soon as it runs over, values that
// are not finite or beyond the bound are named, and the caller's abort ends a read with its reason.
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {checkKvRowValues, checkValues, MAX_ABS_VALUE, readExact, readJson, readText} from "../../../js-glue/src/pipeline/node_answer.js";

const CHUNK = 1024;

// A Response of `chunks` chunks of CHUNK bytes (endless when Infinity), counting pulls and
// whether it was cancelled.
function counted(chunks, headers = {}) {
  const seen = {pulls: 0, cancelled: false};
  const body = new ReadableStream({
    pull(controller) {
      if (seen.pulls >= chunks) return controller.close();
      seen.pulls++;
      controller.enqueue(new Uint8Array(CHUNK).fill(seen.pulls));
    },
    cancel() {
      seen.cancelled = true;
    },
  }, {highWaterMark: 0});
  return {response: new Response(body, {headers}), seen};
}

const refused = (pattern) => (error) => error.code === "bad_response" && pattern.test(error.message);

describe("a node's answer", () => {
  test("exactly the bytes asked for is read whole", async () => {
    const {response} = counted(3);
    const buffer = await readExact(response, 3 * CHUNK, "logits");
    assert.equal(buffer.byteLength, 3 * CHUNK);
    assert.equal(new Uint8Array(buffer)[2 * CHUNK], 3);
  });

  test("a Content-Length other than asked for is refused unread", async () => {
    for (const declared of [String(600 * 2 ** 20), "1", "abc"]) {
      const {response, seen} = counted(Infinity, {"content-length": declared});
      await assert.rejects(readExact(response, 3 * CHUNK, "logits"), refused(/declares .* bytes \(Content-Length\), expected 3072/));
      assert.equal(seen.pulls, 0);
      assert.ok(seen.cancelled);
    }
  });

  test("a body without Content-Length is cancelled as soon as it runs over", async () => {
    const {response, seen} = counted(Infinity);
    await assert.rejects(readExact(response, 3 * CHUNK, "logits"), refused(/runs past the 3072 bytes/));
    assert.equal(seen.pulls, 4);
    assert.ok(seen.cancelled);
  });

  test("a short body is refused", async () => {
    await assert.rejects(readExact(counted(2).response, 3 * CHUNK, "logits"), refused(/ended after 2048 bytes, expected 3072/));
  });

  test("the caller's abort ends a read with its reason; a broken connection is 'unavailable'", async () => {
    // A fetch's body errors when the fetch's signal fires or its connection breaks: so do these.
    const erroring = () => {
      let errorIt;
      const body = new ReadableStream({start: (c) => { errorIt = (e) => c.error(e); }});
      return {response: new Response(body), errorIt};
    };
    const controller = new AbortController();
    const aborted = erroring();
    controller.signal.addEventListener("abort", () => aborted.errorIt(new DOMException("aborted", "AbortError")));
    const reading = readExact(aborted.response, 8, "logits", controller.signal);
    const reason = new Error("the deadline passed");
    controller.abort(reason);
    await assert.rejects(reading, (error) => error === reason);

    const broken = erroring();
    const brokenRead = readExact(broken.response, 8, "logits", new AbortController().signal);
    broken.errorIt(new TypeError("terminated"));
    await assert.rejects(brokenRead, (error) => error.code === "unavailable" && /logits: the answer broke off after 0 bytes \(terminated\)/.test(error.message));
  });

  test("JSON and text are bounded", async () => {
    assert.deepEqual(await readJson(new Response('{"n_past": 3}'), 100, "truncate"), {n_past: 3});
    await assert.rejects(readJson(new Response("x".repeat(101)), 100, "info"), refused(/larger than 100 bytes/));
    await assert.rejects(readJson(new Response("{"), 100, "info"), refused(/not JSON/));
    const {response, seen} = counted(Infinity);
    assert.equal(await readText(response, 10 * CHUNK, "error"), null);
    assert.ok(seen.cancelled && seen.pulls === 11);
  });

  test("values that are not finite or beyond the bound are named by row and column", () => {
    const floats = new Float32Array(8).fill(1);
    checkValues(floats, 4, "logits");
    floats[6] = -MAX_ABS_VALUE;
    checkValues(floats, 4, "logits");
    for (const [value, kind] of [[NaN, "not finite"], [Infinity, "not finite"], [-Infinity, "not finite"], [3e38, "beyond"], [-MAX_ABS_VALUE * 2, "beyond"]]) {
      floats[6] = value;
      assert.throws(() => checkValues(floats, 4, "logits"), refused(new RegExp(`^logits: value .* at row 1, column 2 is ${kind}`)));
    }
  });

  test("K/V rows' f16 infinities and NaNs are refused", () => {
    // Two positions of one f16 K value and one f16 V value: 1, -1, the largest finite, 0.
    const bytes = new Uint8Array(Uint16Array.of(0x3c00, 0xbc00, 0x7bff, 0x0000).buffer);
    checkKvRowValues(bytes, 4, {cacheTypeK: "f16", cacheTypeV: "f16"}, "layer 13");
    for (const bad of [0x7c00, 0xfc00, 0x7e00]) {
      new DataView(bytes.buffer).setUint16(6, bad, true);
      assert.throws(() => checkKvRowValues(bytes, 4, {cacheTypeK: "f16", cacheTypeV: "f16"}, "layer 13"),
        refused(new RegExp(`^layer 13: the f16 at byte 6 \\(0x${bad.toString(16)}\\) is not finite`)));
    }
  });

  test("quantized K/V rows: only the blocks' f16 scales are read as f16", () => {
    // One position: a q8_0 K block (34 bytes: scale, 32 values), then a q4_0 V block (18 bytes).
    const bytes = new Uint8Array(34 + 18).fill(0xff);  // the values: any bytes, 0xff 0xff included
    const view = new DataView(bytes.buffer);
    view.setUint16(0, 0x3c00, true);
    view.setUint16(34, 0x2e66, true);
    const types = {cacheTypeK: "q8_0", cacheTypeV: "q4_0"};
    checkKvRowValues(bytes, 52, types, "layer 2");
    view.setUint16(34, 0x7c00, true);
    assert.throws(() => checkKvRowValues(bytes, 52, types, "layer 2"), refused(/^layer 2: the f16 at byte 34 \(0x7c00\) is not finite/));
    // Read as f16 rows, the same bytes hold NaNs from the first value on.
    view.setUint16(34, 0x2e66, true);
    assert.throws(() => checkKvRowValues(bytes, 52, {cacheTypeK: "f16", cacheTypeV: "f16"}, "layer 2"), refused(/byte 2 /));
  });
});
