// plan --mmproj (docs/deployment.md, "3. Sizing a node"): the projector's towers counted from its
// header as the engine sizes them, checked against the WASM memory a module of their own grows
// to when it holds them and encodes its largest image or a 30 s clip; and the placement: beside
// node 0 when both fit its budget, else an encoder node of its own.
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import path from "node:path";
import {describe, test} from "node:test";

import {openProjectorModule} from "../../../js-glue/src/generation/open_projector.js";
import {audioProjector, eModel, visionProjector} from "../support/encoder_node.mjs";
import {root} from "../support/models.mjs";

const cli = path.join(root, "js-glue", "bin", "layerfold.js");
const MIB = 2 ** 20;

function plan(args) {
  const r = spawnSync(process.execPath, [cli, "plan", eModel(), "--nodes", "2", ...args], {encoding: "utf8"});
  assert.equal(r.status, 0, r.stderr);
  return r.stdout;
}

// The module's memory once a fresh module holding the projector has run encode(towers).
async function grownTo(mmproj, encode) {
  const projector = await openProjectorModule(mmproj, {threads: 1});
  try {
    await encode(projector);
    return projector.vision.lf.bytes().length;
  } finally {
    projector.close();
  }
}

// The largest image the tiny tower's position tables take: a 96 x 96 patch grid.
const largestImage = ({vision}) => vision.encode(new Uint8Array(1536 * 1536 * 3).fill(90), 1536, 1536, {maxTokens: 1120});
const longestChunk = ({audio}) => audio.encode(new Float32Array(30 * 16000).fill(0.1));

describe("plan --mmproj", () => {
  test("the count is what the towers' module grows to, within the module's own memory and its growth steps", async () => {
    const {encoder} = JSON.parse(plan(["--json", "--mmproj", audioProjector()]));
    const image = await grownTo(audioProjector(), largestImage);
    const clip = await grownTo(audioProjector(), longestChunk);
    for (const [what, counted, grown] of [["an image", encoder.weights + encoder.vision, image], ["a 30 s clip", encoder.weights + encoder.audio, clip]]) {
      // Emscripten grows memory by a fifth at a time, and the module holds its own memory (64 MiB to start).
      assert.ok(grown >= counted && grown <= 1.25 * counted + 32 * MIB,
        `${what}: counted ${(counted / MIB).toFixed(1)} MiB, the module grew to ${(grown / MIB).toFixed(1)} MiB`);
    }
    assert.equal(encoder.total, encoder.weights + encoder.vision + encoder.audio);
    const visionOnly = JSON.parse(plan(["--json", "--mmproj", visionProjector()])).encoder;
    assert.equal(visionOnly.audio, 0, "a projector without an audio encoder counts no clip");
    assert.ok(await grownTo(visionProjector(), largestImage) >= visionOnly.total);
  });

  test("beside node 0 within its budget, else an encoder node of its own", () => {
    const roomy = plan(["--mmproj", audioProjector()]);
    assert.match(roomy, /^encoder: [\d.]+ MiB \(weights [\d.]+ MiB, an image at the largest budget [\d.]+ MiB, a 30 s clip [\d.]+ MiB\): fits beside node 0: serve its layers with --mmproj/m);
    const edge = plan(["--memory", "128MiB", "--mmproj", audioProjector()]);
    assert.match(edge, /does not fit beside node 0: run an encoder node of its own \(a container, serve --mmproj\), .*the edge gateway ENCODER_URL/);
    const json = JSON.parse(plan(["--json", "--memory", "128MiB", "--mmproj", audioProjector()]));
    assert.equal(json.encoder.on_first_node, false);
    assert.equal(JSON.parse(plan(["--json", "--mmproj", audioProjector()])).encoder.on_first_node, true);
  });
});
