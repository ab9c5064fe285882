// Output bytes do not change when the code is reorganized or sped up: SHA-256 digests of the
// forward outputs and logits of the test models, in both WASM builds and at several thread
// counts, against tests/golden/output_bytes.json. The digests are the engine's arithmetic as
// docs/forward-pass.md states it ("What the engine computes"), recorded with
// `node tests/js/node/output_bytes.test.mjs --record`; a deliberate change of the arithmetic must
// re-record them and say why in its commit.
import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import {describe, test} from "node:test";

import {LayerNode} from "../../../js-glue/src/node/layer_node.js";
import {model, root} from "../support/models.mjs";

const goldenFile = path.join(root, "tests", "golden", "output_bytes.json");

// Dense and top-K FFN, truncated attention, several quant types and both architectures; prompts
// longer than the sliding windows, then two decode steps.
const CASES = [
  {name: "tiny", preset: "tiny", extra: ["--type", "Q4_0"]},
  {name: "tiny-q8", preset: "tiny", extra: ["--type", "Q8_0"]},
  {name: "tiny-f16", preset: "tiny", extra: ["--type", "F16"]},
  {name: "tiny-gemma3", preset: "tiny-gemma3", extra: ["--type", "Q4_0"]},
  {name: "small-q4", preset: "small", extra: ["--type", "Q4_0"]},
  {name: "small-q4", preset: "small", extra: ["--type", "Q4_0"], approx: {ffnTopK: 0.3, ffnTopKThreshold: 1}, tag: "top-k"},
  {name: "small-q4", preset: "small", extra: ["--type", "Q4_0"], approx: {truncatedAttention: true, truncationThreshold: 1}, tag: "truncated"},
];
const BUILDS = [{build: "threaded", threads: 1}, {build: "threaded", threads: 2}, {build: "threaded", threads: 3}, {build: "single"}];
const prompt = [2, ...Array.from({length: 40}, (_, i) => 10 + ((i * 37) % 500))];

const sha = (arrays) => {
  const h = crypto.createHash("sha256");
  for (const a of arrays) h.update(Buffer.from(a.buffer, a.byteOffset, a.byteLength));
  return h.digest("hex");
};

async function digests(config, build) {
  const file = model(config.name, config.preset, config.extra);
  const node = await LayerNode.open({model: file, ...build, withTokenizer: false});
  try {
    const approx = config.approx ?? {};
    const hidden = await node.forward({session: "s", startPos: 0, hidden: node.embed(prompt), approx});
    const logits = node.logits(hidden.subarray(hidden.length - node.nEmbd));
    const steps = [];
    for (const [startPos, token] of [[prompt.length, 600], [prompt.length + 1, 601]]) {
      steps.push(await node.forward({session: "s", startPos, hidden: node.embed([token]), approx}));
    }
    return {prompt: sha([hidden]), logits: sha([logits]), decode: sha(steps)};
  } finally {
    node.close();
  }
}

const key = (config) => config.tag ? `${config.name}/${config.tag}` : config.name;

if (process.argv.includes("--record")) {
  const golden = {};
  for (const config of CASES) golden[key(config)] = await digests(config, {build: "threaded", threads: 2});
  fs.mkdirSync(path.dirname(goldenFile), {recursive: true});
  fs.writeFileSync(goldenFile, `${JSON.stringify(golden, null, 2)}\n`);
  console.log(`recorded ${goldenFile}`);
} else {
  const golden = JSON.parse(fs.readFileSync(goldenFile, "utf8"));
  describe("output bytes equal the recorded digests", () => {
    for (const config of CASES) {
      test(key(config), {timeout: 300_000}, async () => {
        for (const build of BUILDS) {
          assert.deepEqual(await digests(config, build), golden[key(config)], `${key(config)} ${JSON.stringify(build)}`);
        }
      });
    }
  });
}
