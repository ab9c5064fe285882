// An image's soft tokens counted from the tower's config alone (protocol/image_tokens.js), for a
// host that sends its images to an encoder node: the engine's count (lf_vision_tokens), its
// resized size and its refusals, over sizes around the alignment, the budgets' edges and the
// position tables' limit.
import assert from "node:assert/strict";
import {test} from "node:test";

import {openProjectorModule} from "../../../js-glue/src/generation/open_projector.js";
import {visionConfig} from "../../../js-glue/src/gguf/projector_config.js";
import {imageTokens} from "../../../js-glue/src/protocol/image_tokens.js";
import {visionProjector} from "../support/encoder_node.mjs";

// The engine's answer, or its refusal's message.
const outcome = (count) => {
  try {
    return count();
  } catch (error) {
    return {refused: error.message};
  }
};

test("the count from the config is the engine's, refusals and all", async (t) => {
  const projector = await openProjectorModule(visionProjector(), {threads: 1});
  t.after(() => projector.close());
  const config = visionConfig(projector.header);
  const sides = [1, 2, 23, 24, 25, 47, 48, 71, 72, 73, 95, 96, 97, 333, 479, 480, 481, 1000, 1023, 1535, 1536, 4000, 4607, 4608, 4609, 46000, 46001];
  const budgets = [0, 69, 70, 71, 80, 280, 281, 1120, 1121];
  let compared = 0, refused = 0;
  for (const width of sides) {
    for (const height of [1, 37, 480, 1535, 4608, 46000]) {
      for (const maxTokens of budgets) {
        const want = outcome(() => projector.vision.tokens(width, height, {maxTokens}));
        assert.deepEqual(outcome(() => imageTokens(config, width, height, {maxTokens})), want, `${width} x ${height} at ${maxTokens}`);
        compared++;
        if (want.refused) refused++;
      }
    }
  }
  assert.ok(refused > 0 && compared - refused > 300, `${refused} of ${compared} refused: both sides were compared`);
});
