// A clip's soft tokens counted without the encoder (protocol/clip_tokens.js), for a host that sends
// its clips to an encoder node: the engine's chunks and tokens (lf_audio_tokens) and its
// refusals, around the frame and chunk edges.
import assert from "node:assert/strict";
import {test} from "node:test";

import {openProjectorModule} from "../../../js-glue/src/generation/open_projector.js";
import {clipTokens} from "../../../js-glue/src/protocol/clip_tokens.js";
import {audioProjector} from "../support/encoder_node.mjs";

const outcome = (count) => {
  try {
    return count();
  } catch (error) {
    return {refused: error.message};
  }
};

test("the count is the engine's, refusals and all", async (t) => {
  const projector = await openProjectorModule(audioProjector(), {threads: 1});
  t.after(() => projector.close());
  const chunk = 480000;
  const lengths = [0, 1, 2, 160, 161, 319, 320, 321, 322, 480, 481, 799, 800, 801, 16000, 47999, 48000, chunk - 1, chunk, chunk + 1, chunk + 2,
    chunk + 161, 31 * 16000, 2 * chunk, 2 * chunk + 1, 600 * 16000];
  for (const n of lengths) {
    assert.deepEqual(outcome(() => clipTokens(n)), outcome(() => projector.audio.tokens(n)), `${n} samples`);
  }
  assert.deepEqual(clipTokens(31 * 16000), [750, 25]);
});
