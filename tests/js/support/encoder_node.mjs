// Encoder nodes for the tests (docs/http-api.md, "Encoding media"): `serve --mmproj` in this
// process over the synthetic models a projector of the same width goes with: the Gemma 4
// vocabulary's 64-wide model and the tiny vision tower, and an E-model of that vocabulary whose
// projector also hears (a 1-block audio encoder).
import {openNodeEncoder} from "../../../js-glue/src/generation/node_encoder.js";
import {serve} from "../../../js-glue/src/server/node_host.js";
import {GEMMA4_TEMPLATE, GEMMA4_VOCAB, gemma4} from "./gateway_fixture.mjs";
import {model} from "./models.mjs";

export const visionProjector = () => model("mmproj-tiny", "tiny", ["--mmproj", "--vision-tower", "tiny"]);
export {gemma4};
// Gemma 4's vocabulary and template on a small model with per-layer embeddings (an E-model: the
// ones that hear).
const E_MODEL = () => ["--vocab-gguf", GEMMA4_VOCAB(), "--chat-template", GEMMA4_TEMPLATE(), "--n-embd-per-layer", "32"];
export const eModel = () => model("gemma4-e-template", "gemma4-vocab", E_MODEL());
export const audioProjector = () => model("mmproj-gemma4-e-audio", "gemma4-vocab",
  [...E_MODEL(), "--mmproj", "--vision-tower", "tiny", "--audio", "--audio-layers", "1"]);

/**
 * `serve` of `file` (default: every layer) with the projector `mmproj`, on a free loopback port,
 * loaded; shut down after the test.
 * @example const node = await startEncoderNode(t, {file: gemma4(), mmproj: visionProjector(), authToken: "s"});
 */
export async function startEncoderNode(t, {file, mmproj, ...options}) {
  const encoder = mmproj === undefined ? undefined : openNodeEncoder(mmproj, {threads: 1});
  const node = await serve({model: file, encoder, port: 0, host: "127.0.0.1", threads: 1, log: () => {}, ...options});
  t.after(() => node.shutdown());
  await node.loaded;
  return node;
}
