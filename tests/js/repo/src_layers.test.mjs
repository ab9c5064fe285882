// The engine's folders include one another only downward, as docs/architecture.md's table draws
// it: every `#include "folder/..."` of src/ is held against the folders its own folder may reach,
// and the model reaches the kernels only through their interface headers.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import {test} from "node:test";

import {root} from "../support/models.mjs";

const LOW = ["layout", "quant", "gguf", "base"];
// Folder -> the other folders of src/ its files may include. capi/, tools/ and native/ sit on
// top or apart and are not listed.
const MAY_INCLUDE = {
  audio: ["projector", "model", "ops", "kernels", ...LOW],
  vision: ["projector", "model", "ops", "kernels", ...LOW],
  projector: ["model", "ops", "kernels", ...LOW],
  model: ["approx", "ops", "kernels", ...LOW],
  approx: ["kernels", ...LOW],
  ops: ["kernels", ...LOW],
  kernels: LOW,
  layout: ["quant", "gguf", "base"],
  quant: ["gguf", "base"],
  gguf: ["base"],
  tokenizer: ["gguf", "base"],
  base: [],
};
// What of kernels/ the model may name: the GEMMs' and the attention kernels' interfaces and the
// read probe's sum; never a backend (simd.h) nor an algorithm's inner header.
const KERNEL_INTERFACES = ["kernels/gemm.h", "kernels/attention.h", "kernels/weight_checksum.h"];

/** Every `#include "a/b.h"` of the C++ files under src/<folder>, as {file, target}. */
function includes(folder) {
  const dir = path.join(root, "src", folder);
  const found = [];
  for (const name of fs.readdirSync(dir, {recursive: true})) {
    if (!/\.(h|cpp)$/.test(name)) continue;
    const text = fs.readFileSync(path.join(dir, name), "utf8");
    for (const m of text.matchAll(/^#include "([^"]+)"/gm)) found.push({file: `src/${folder}/${name}`, target: m[1]});
  }
  return found;
}

test("each folder of src/ includes only the folders below it", () => {
  const wrong = [];
  for (const [folder, allowed] of Object.entries(MAY_INCLUDE)) {
    const found = includes(folder);
    assert.ok(found.length > 0, `no includes read under src/${folder}`);
    for (const {file, target} of found) {
      const to = target.split("/")[0];
      if (to !== folder && !allowed.includes(to)) wrong.push(`${file} -> ${target}`);
    }
  }
  assert.deepEqual(wrong, []);
});

test("the model and the projector's towers reach kernels/ only through their interface headers", () => {
  const wrong = [...includes("model"), ...includes("vision"), ...includes("audio"), ...includes("projector")]
    .filter(({target}) => target.startsWith("kernels/") && !KERNEL_INTERFACES.includes(target))
    .map(({file, target}) => `${file} -> ${target}`);
  assert.deepEqual(wrong, []);
});
