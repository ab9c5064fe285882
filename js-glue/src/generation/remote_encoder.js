// A projector's towers on an encoder node (`serve --mmproj`; docs/http-api.md, "Encoding media"),
// with the shape MediaInput (media.js) takes of the local VisionEncoder and AudioEncoder: a host
// that holds no tower (the edge gateway, a gateway beside a node that has room for one) counts an
// item's tokens from the node's config (protocol/image_tokens.js, protocol/clip_tokens.js) and has the
// node encode it. The node is untrusted as every remote node is: its config is checked at open,
// and each answer read within the exact size of the tokens counted here, its values checked,
// under a deadline, through the NodeClient's one retry.
import { AUDIO_SAMPLE_RATE } from '../audio/decode_audio.js';
import { clipTokens } from '../protocol/clip_tokens.js';
import { decodeEncoderInfo, imageQuery, rowsBytes } from '../protocol/encode_body.js';
import { imageTokens } from '../protocol/image_tokens.js';
import { checkValues, MAX_JSON_BYTES, readExact, readJson } from '../pipeline/node_answer.js';
import { NodeClient } from '../pipeline/node_client.js';

const OCTETS = 'application/octet-stream';
/** How long one encode may take by default, its answer read: an image at 1120 tokens on a 31B tower. */
export const DEFAULT_ENCODE_TIMEOUT_MS = 120_000;

const asBytes = (array) => new Uint8Array(array.buffer, array.byteOffset, array.byteLength);

// One call: the body sent, the answer of exactly `tokens` rows read and checked.
async function encodeCall(client, path, body, tokens, nEmbdText) {
  const what = `${client.url} POST ${path.split('?')[0]}`;
  const response = await client.request('POST', path, { body, contentType: OCTETS });
  const embd = new Float32Array(await readExact(response, rowsBytes(tokens, nEmbdText), `${what} (${tokens} rows of ${nEmbdText})`));
  checkValues(embd, nEmbdText, what);
  return embd;
}

class RemoteVision {
  #client;

  constructor(client, config) {
    this.#client = client;
    this.config = config;
    this.nEmbdText = config.nEmbdText;
  }

  /**
   * As VisionEncoder.tokens, counted from the node's config; also refuses an image over the
   * node's pixel limit.
   * @example vision.tokens(1000, 700, { maxTokens: 280 }) // { tokens: 266, width: 672, height: 480 } (say)
   */
  tokens(width, height, { maxTokens = 0 } = {}) {
    if (width * height > this.config.maxPixels) {
      throw new RangeError(`the image is ${width} x ${height} = ${width * height} pixels; the encoder node takes at most ${this.config.maxPixels}`);
    }
    return imageTokens(this.config, width, height, { maxTokens });
  }

  /**
   * As VisionEncoder.encode: rgb [height · width · 3] -> a Promise of {tokens, embd}.
   * @example const { tokens, embd } = await vision.encode(rgb, 640, 480, { maxTokens: 280 });
   */
  async encode(rgb, width, height, { maxTokens = 0 } = {}) {
    if (rgb.length !== width * height * 3) {
      throw new RangeError(`an image of ${width} x ${height} has ${width * height * 3} RGB bytes, not ${rgb.length}`);
    }
    const { tokens } = this.tokens(width, height, { maxTokens });
    const embd = await encodeCall(this.#client, `/v1/encode/image?${imageQuery({ width, height, maxTokens })}`, rgb, tokens, this.nEmbdText);
    return { tokens, embd };
  }
}

class RemoteAudio {
  #client;

  constructor(client, config) {
    this.#client = client;
    this.config = config;
    this.nEmbdText = config.nEmbdText;
  }

  /**
   * As AudioEncoder.tokens, counted here; also refuses a clip over the node's length limit.
   * @example audio.tokens(31 * 16000) // [750, 25]
   */
  tokens(nSamples) {
    if (nSamples > this.config.maxSeconds * AUDIO_SAMPLE_RATE) {
      throw new RangeError(`the clip is ${(nSamples / AUDIO_SAMPLE_RATE).toFixed(1)} s; the encoder node takes at most ${this.config.maxSeconds} s`);
    }
    return clipTokens(nSamples);
  }

  /**
   * As AudioEncoder.encode: samples (16 kHz mono) -> a Promise of {tokens, chunks, embd}.
   * @example const { tokens, embd } = await audio.encode(samples);
   */
  async encode(samples) {
    const chunks = this.tokens(samples.length);
    const tokens = chunks.reduce((a, b) => a + b, 0);
    return { tokens, chunks, embd: await encodeCall(this.#client, '/v1/encode/audio', asBytes(samples), tokens, this.nEmbdText) };
  }
}

export class RemoteEncoder {
  /**
   * The towers of the encoder node at `url`, as openProjector gives the local ones: {vision,
   * audio (null when its projector has none), close()}. Waits up to readyTimeoutMs for the node
   * to load; refuses a node that encodes nothing or whose info is not sizes ('unsupported',
   * 'bad_response'). timeoutMs bounds each encode, its answer read.
   * @example const { vision, audio } = await RemoteEncoder.open('http://10.0.0.7:8080', { authToken: process.env.NODES_AUTH_TOKEN });
   */
  static async open(url, { authToken, timeoutMs = DEFAULT_ENCODE_TIMEOUT_MS, readyTimeoutMs = 120_000 } = {}) {
    const client = new NodeClient(url, { authToken, timeoutMs, readyTimeoutMs });
    await client.waitReady({ unreachableIsFatal: true });
    const info = await readJson(await client.request('GET', '/v1/info'), MAX_JSON_BYTES, `${client.url} GET /v1/info`);
    let config;
    try {
      config = decodeEncoderInfo(info);
    } catch (error) {
      error.message = `encoder node ${client.url}: ${error.message}`;
      throw error;
    }
    return new RemoteEncoder(client, config);
  }

  constructor(client, { vision, audio }) {
    this.url = client.url;
    this.vision = new RemoteVision(client, vision);
    this.audio = audio ? new RemoteAudio(client, audio) : null;
  }

  /** Nothing is held open between calls. */
  close() {}
}
