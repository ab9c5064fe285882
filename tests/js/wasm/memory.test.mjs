// WASM memory above 2 GiB: a node of a big model places its weights there, and wasm32 hands
// pointers to JS as signed i32. Every pointer must come back as the unsigned address.
import assert from "node:assert/strict";
import fs from "node:fs";
import {test} from "node:test";

import {openModelHeader} from "../../../js-glue/src/gguf/header.js";
import {loadSingleThreadModule} from "../../../js-glue/src/wasm/load_node.js";
import {model} from "../support/models.mjs";

test("pointers above 2 GiB are positive and usable end to end", async () => {
  const lf = await loadSingleThreadModule();
  // Fill the first 2 GiB (in pieces: one allocation is capped below 2 GiB) so what follows lands above.
  const fillers = Array.from({length: 5}, () => lf.alloc(2 ** 29 - 2 ** 16));
  try {
    const file = fs.readFileSync(model("tiny", "tiny", ["--type", "Q4_0"]));
    const ptr = lf.alloc(16);
    assert.ok(ptr > 2 ** 31, `allocation at ${ptr}`);
    lf.free(ptr);
    // The header is copied above 2 GiB and parsed there; the JSON string lives there too.
    const {gguf, header} = await openModelHeader(lf, {size: file.length, read: async (s, e) => file.subarray(s, e)});
    lf.fn.lf_gguf_free(gguf);
    assert.equal(header.metadata["general.architecture"], "gemma4");
    assert.equal(header.tensors.length > 0, true);
    assert.equal(header.info.n_layer, 2);
  } finally {
    for (const f of fillers) lf.free(f);
  }
});

test("a C string is read only inside the module's memory: a pointer with no NUL before the end is an error, not an endless scan", {timeout: 10_000}, async () => {
  const lf = await loadSingleThreadModule();
  const size = lf.bytes().length;
  const ptr = lf.alloc(8);
  lf.bytes().set([0x6f, 0x6b, 0], ptr);
  assert.equal(lf.readCString(ptr), "ok");
  assert.throws(() => lf.readCString(size + 16), /no string at/);
  lf.bytes().fill(0x41, size - 4);
  assert.throws(() => lf.readCString(size - 4), /no string at/);
  lf.free(ptr);
});
