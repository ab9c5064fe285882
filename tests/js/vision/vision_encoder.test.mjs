// The vision tower through the WASM modules (js-glue/src/vision/encoder.js over lf_vision_*):
// the same soft-token embeddings, byte for byte, as the native build's lf_vision at every thread
// count and in the single-thread module, with F16 and BF16 matrices, and requests the engine
// cannot honor refused by what is wrong.
import assert from "node:assert/strict";
import fs from "node:fs";
import {after, before, describe, test} from "node:test";

import {openSource} from "../../../js-glue/src/sources/open_source.js";
import {VisionEncoder} from "../../../js-glue/src/vision/encoder.js";
import {loadSingleThreadModule, loadThreadedModule} from "../../../js-glue/src/wasm/load_node.js";
import {lfVisionRun, rgbImage} from "../support/llama_vision.mjs";
import {model} from "../support/models.mjs";

const projector = () => model("mmproj-tiny", "tiny", ["--mmproj", "--vision-tower", "tiny"]);
const bf16Projector = () => model("mmproj-tiny-bf16", "tiny", ["--mmproj", "--vision-tower", "tiny", "--vision-type", "BF16"]);

// [width, height, max tokens (0: the projector's own)]
const IMAGES = [[37, 23, 0], [200, 120, 80]];

const bits = (floats) => new Uint32Array(Float32Array.from(floats).buffer);

describe("vision encoder in WASM", () => {
  const modules = [];
  before(async () => {
    modules.push({name: "threaded, 1 thread", lf: await loadThreadedModule({threads: 2}), threads: 1});
    modules.push({name: "threaded, 2 threads", lf: modules[0].lf, threads: 2});
    modules.push({name: "single thread", lf: await loadSingleThreadModule(), threads: 1});
  });
  after(() => {
    modules[0].lf.close();
    modules[2].lf.close();
  });

  test("the embeddings are the native build's, byte for byte, in every module and thread count", async () => {
    for (const file of [projector(), bf16Projector()]) for (const {name, lf, threads} of modules) {
      const vision = await VisionEncoder.open(lf, await openSource(file), {threads});
      try {
        for (const [w, h, maxTokens] of IMAGES) {
          const image = rgbImage(w, h);
          const ref = lfVisionRun(file, image, w, h, {maxTokens});
          const size = vision.tokens(w, h, {maxTokens});
          assert.deepEqual(size, {tokens: ref.n_tokens, width: ref.width, height: ref.height}, `${name} ${w}x${h}`);
          const ours = await vision.encode(fs.readFileSync(image), w, h, {maxTokens});
          assert.equal(ours.tokens, ref.n_tokens);
          assert.equal(ours.embd.length, ref.n_tokens * vision.nEmbdText);
          assert.deepEqual(bits(ours.embd), bits(ref.embd), `${name} ${w}x${h}: the embeddings differ from lf_vision's`);
        }
      } finally {
        vision.close();
      }
    }
  });

  test("requests it cannot honor are refused by what is wrong, and the encoder still works", async () => {
    const {lf} = modules[0];
    const vision = await VisionEncoder.open(lf, await openSource(projector()), {threads: 1});
    try {
      const rgb = fs.readFileSync(rgbImage(37, 23));
      await assert.rejects(vision.encode(rgb, 37, 23, {maxTokens: 50}), /token budget must be 70 to 1120, not 50/);
      assert.throws(() => vision.tokens(37, 23, {maxTokens: 5000}), /token budget must be 70 to 1120, not 5000/);
      assert.throws(() => vision.tokens(0, 23), /the image is 0 x 23; each side must be 1 to 46000 pixels/);
      assert.throws(() => vision.tokens(30000, 46001), /each side must be 1 to 46000 pixels/);
      await assert.rejects(vision.encode(rgb.subarray(1), 37, 23), /an image of 37 x 23 has 2553 RGB bytes, not 2552/);
      // Asked for at once, two images are encoded in turn, each the bytes it gives alone.
      const [again, twice] = await Promise.all([vision.encode(rgb, 37, 23), vision.encode(rgb, 37, 23)]);
      assert.deepEqual(bits(twice.embd), bits(again.embd));
      assert.equal(again.tokens, vision.tokens(37, 23).tokens);
      assert.ok(again.embd.every(Number.isFinite));
    } finally {
      vision.close();
    }
    await assert.rejects(VisionEncoder.open(lf, await openSource(model("tiny", "tiny", ["--type", "Q4_0"]))),
      /projector .*tiny\.gguf: not a projector file: general\.architecture is 'gemma4', expected 'clip'/);
  });
});
