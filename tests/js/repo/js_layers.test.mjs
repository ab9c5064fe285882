// The JS host's folders import one another only downward, as docs/architecture.md's table of
// js-glue/src draws it: every relative import of js-glue/src is held against the folders its own
// folder may reach, so no arrow runs back up and no folders import each other in a circle.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import {test} from "node:test";

import {root} from "../support/models.mjs";

const LEAVES = ["tokens", "chat", "sources", "log", "wasm"];
// Folder -> the other folders of js-glue/src its files may import (index.js, the package's
// front, sits on top and is not listed).
const MAY_IMPORT = {
  cli: ["gateway", "generation", "server", "pipeline", "node", "vision", "audio", "gguf", "telemetry", "protocol", ...LEAVES],
  gateway: ["generation", "server", "pipeline", "vision", "audio", "gguf", "telemetry", "protocol", ...LEAVES],
  generation: ["server", "pipeline", "vision", "audio", "gguf", "telemetry", "protocol", ...LEAVES],
  server: ["group", "node", "telemetry", "protocol", ...LEAVES],
  pipeline: ["group", "node", "gguf", "telemetry", "protocol", ...LEAVES],
  group: ["node", "gguf", "protocol", ...LEAVES],
  node: ["gguf", "protocol", ...LEAVES],
  vision: ["gguf", ...LEAVES],
  audio: ["gguf", ...LEAVES],
  gguf: ["sources", "tokens", "wasm"],
  telemetry: ["protocol", "log", "wasm"],
  protocol: ["wasm"],
  tokens: [],
  chat: [],
  sources: [],
  log: [],
  wasm: [],
};

const src = path.join(root, "js-glue", "src");

/** Every relative import (static or dynamic) of the files under js-glue/src/<folder>, as {file, to}. */
function imports(folder) {
  const found = [];
  for (const name of fs.readdirSync(path.join(src, folder), {recursive: true})) {
    if (!name.endsWith(".js")) continue;
    const file = path.join(src, folder, name);
    // Code only: an import in a JSDoc example or a type reference is not an arrow.
    const text = fs.readFileSync(file, "utf8").split("\n").filter((line) => !/^\s*(\*|\/\/|\/\*)/.test(line)).join("\n");
    for (const m of text.matchAll(/(?:from|import\()\s*'(\.{1,2}\/[^']+)'/g)) {
      const target = path.relative(src, path.resolve(path.dirname(file), m[1]));
      found.push({file: path.relative(root, file), to: target.split(path.sep)[0]});
    }
  }
  return found;
}

test("every folder of js-glue/src is in the table", () => {
  const folders = fs.readdirSync(src, {withFileTypes: true}).filter((e) => e.isDirectory()).map((e) => e.name);
  assert.deepEqual(folders.sort(), Object.keys(MAY_IMPORT).sort());
});

test("each folder of js-glue/src imports only the folders below it", () => {
  const wrong = [];
  for (const [folder, allowed] of Object.entries(MAY_IMPORT)) {
    for (const {file, to} of imports(folder)) {
      if (to !== folder && !allowed.includes(to)) wrong.push(`${file} -> ${to}/`);
    }
  }
  assert.deepEqual(wrong, []);
});
