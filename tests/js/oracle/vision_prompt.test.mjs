// An image in the prompt against llama.cpp (docs/vision.md, "An image in the decoder"). mtmd
// splits "Look: <__media__> What is it?" into text, the image's soft tokens and text, and decodes
// the image's rows in one call, non-causally on the sliding layers. Our pipeline gets the same
// text tokens (our tokenizer's, checked equal to mtmd's) and the image's rows through stepMedia,
// across two nodes, in both WASM builds:
//   - with mtmd's own embeddings of the image, the decoder alone is judged as the text oracle
//     judges where we mirror llama.cpp's arithmetic (tests/js/support/oracle_judge.mjs): its
//     top 50 within 0.01 in ln p, its next token and 16 greedy tokens. With a q8_0 cache and
//     with an f16 one: an image's rows are at least 70, and for 64 rows and more with an f16
//     cache llama.cpp takes its tiled flash attention, which the decoder mirrors for a span
//     where llama.cpp runs its AVX-512 kernels (docs/attention.md, "The f32 tile path");
//   - with our encoder's (vision/encoder.js), the whole path: where llama.cpp runs its AVX-512
//     kernels the tower's rows are mtmd's bit for bit (docs/vision.md, "Agreement") and the
//     whole is judged as the decoder is; elsewhere the same greedy tokens, its distance reported.
import assert from "node:assert/strict";
import fs from "node:fs";
import {after, before, describe, test} from "node:test";

import {Pipeline} from "../../../js-glue/src/pipeline/pipeline.js";
import {openSource} from "../../../js-glue/src/sources/open_source.js";
import {logSoftmax, topK} from "../../../js-glue/src/tokens/logits.js";
import {VisionEncoder} from "../../../js-glue/src/vision/encoder.js";
import {loadThreadedModule} from "../../../js-glue/src/wasm/load_node.js";
import {F64Reference} from "../support/f64_reference.mjs";
import {argmax, gemma4} from "../support/gateway_fixture.mjs";
import {llamaVision, rgbImage} from "../support/llama_vision.mjs";
import {llamaVisionPrompt} from "../support/llama_vision_prompt.mjs";
import {model} from "../support/models.mjs";
import {llamaKernels, mirrors, modelTraits, MIRRORED_BOUND, TOP_N} from "../support/oracle_judge.mjs";

const GREEDY = 16;
const PROMPT = "Look: <__media__> What is it?";
const [WIDTH, HEIGHT] = [37, 23];
const CACHES = [{cacheTypeK: "q8_0", cacheTypeV: "q8_0"}, {cacheTypeK: "f16", cacheTypeV: "f16"}];
const projector = () => model("mmproj-tiny", "tiny", ["--mmproj", "--vision-tower", "tiny"]);

const maxDiff = (a, b, ids) => Math.max(...ids.map((id) => Math.abs(a[id] - b[id])));

// The prompt as mtmd's chunks say, the image as `rows`, through the pipeline; then greedy tokens.
async function run(pipeline, chunks, rows) {
  const session = `vision-${Math.random()}`;
  let logits = null;
  for (const chunk of chunks) {
    const out = chunk.type === "text"
      ? await pipeline.step(session, chunk.tokens)
      : await pipeline.stepMedia(session, {rows, span: chunk.non_causal});
    logits = out.logits;
  }
  const logProbs = logSoftmax(logits);
  const greedy = [];
  for (let k = 0; k < GREEDY; k++) {
    greedy.push(argmax(logits));
    ({logits} = await pipeline.step(session, [greedy.at(-1)]));
  }
  await pipeline.dropSession(session);
  return {logProbs, greedy};
}

for (const CACHE of CACHES) describe(`an image in the prompt, against llama.cpp (${CACHE.cacheTypeK} cache)`, () => {
  let file, image, ref, mtmdRows, ourRows, mirrored, towerMirrored;
  const measured = [];
  before(async () => {
    file = gemma4();
    image = rgbImage(WIDTH, HEIGHT);
    const kernels = await llamaKernels();
    console.log(kernels.line);
    const reference = F64Reference.open(file);
    // the image's rows take the tiles with an f16 cache, which the decoder mirrors for AVX-512
    mirrored = mirrors(kernels, {...modelTraits(reference, 2), ...CACHE}) && (CACHE.cacheTypeK !== "f16" || kernels.avx512);
    towerMirrored = kernels.avx512;
    reference.close();
    ref = await llamaVisionPrompt(file, projector(), image, WIDTH, HEIGHT, PROMPT, {greedy: GREEDY, ...CACHE});
    mtmdRows = Float32Array.from((await llamaVision(projector(), image, WIDTH, HEIGHT)).embd);
    const lf = await loadThreadedModule({threads: 2});
    const vision = await VisionEncoder.open(lf, await openSource(projector()), {threads: 2});
    ourRows = (await vision.encode(fs.readFileSync(image), WIDTH, HEIGHT)).embd;
    vision.close();
    lf.close();
  });
  after(() => console.log(`agreement with an image: ${JSON.stringify(measured)}`));

  test("mtmd's chunks are our tokenizer's text and the image's rows", () => {
    assert.deepEqual(ref.chunks.map((c) => c.type), ["text", "image", "text"]);
    const image = ref.chunks[1];
    assert.equal(image.non_causal, true, "mtmd decodes this model's images non-causally");
    assert.equal(mtmdRows.length, ourRows.length);
    assert.equal(ourRows.length % image.n_tokens, 0);
    if (towerMirrored) assert.deepEqual(new Uint32Array(ourRows.buffer, ourRows.byteOffset, ourRows.length), new Uint32Array(mtmdRows.buffer), "our encoder's rows are not mtmd's bit for bit");
  });

  for (const build of ["threaded", "single"]) {
    test(`${build}: llama.cpp's next token and greedy tokens`, {timeout: 600_000}, async (t) => {
      if (!mirrored) {
        t.skip("llama.cpp's kernels on this host are not the engine's for this model and cache");
        return;
      }
      const pipeline = await Pipeline.open({model: file, nodes: "local:0-0,local:1-1", build, threads: 2, maxSpan: 128, ...CACHE});
      t.after(() => pipeline.close());
      const [first, , last] = ref.chunks;
      assert.deepEqual(pipeline.tokenizer.encode("Look: <|image>", {parseSpecial: true}), first.tokens);
      assert.deepEqual(pipeline.tokenizer.encode("<image|> What is it?", {addBos: false, parseSpecial: true}), last.tokens);

      const theirs = logSoftmax(Float32Array.from(ref.logits));
      const top = topK(theirs, TOP_N);
      const decoder = await run(pipeline, ref.chunks, mtmdRows);
      const whole = await run(pipeline, ref.chunks, ourRows);
      const figures = {build, decoder: maxDiff(decoder.logProbs, theirs, top), whole: maxDiff(whole.logProbs, theirs, top)};
      measured.push(figures);
      assert.ok(figures.decoder <= MIRRORED_BOUND, `max |Δ ln p| over llama.cpp's top ${TOP_N}: ${figures.decoder} with mtmd's rows`);
      assert.equal(topK(decoder.logProbs, 1)[0], topK(theirs, 1)[0]);
      assert.deepEqual(decoder.greedy, ref.greedy, "greedy tokens with mtmd's rows");
      assert.deepEqual(whole.greedy, ref.greedy, "greedy tokens with our encoder's rows");
      if (towerMirrored) assert.ok(figures.whole <= MIRRORED_BOUND, `max |Δ ln p| over llama.cpp's top ${TOP_N}: ${figures.whole} with our encoder's rows`);
    });
  }
});
