// Images and audio clips in a chat request (docs/vision.md, "Images through the gateway";
// docs/audio.md, "Audio through the gateway"): each image part's bytes (a data: URL, or an http(s)
// URL fetched where the gateway allows it, within a size, a type and a time) or audio part's (base64
// WAV, MP3 or FLAC), decoded (vision/decode_image.js, audio/decode_audio.js) and encoded by the
// projector's towers into soft-token rows. In the prompt's token ids an item is a run of one
// placeholder per row: a negative id derived from a hash of its pixels and budget or its samples,
// so that two prompts with the same item share a prefix (sessions.js) and a step's ids split into
// token runs and item runs (mediaRuns).
import { AudioError, decodeAudio, DEFAULT_MAX_AUDIO_SECONDS } from '../audio/decode_audio.js';
import { deadlineSignal } from '../pipeline/deadline.js';
import { IMAGE_MAX_TOKENS, IMAGE_MIN_TOKENS } from '../gguf/projector_config.js';
import { decodeImage, DEFAULT_MAX_IMAGE_PIXELS, ImageError } from '../vision/decode_image.js';
import { badParam, OpenAIError } from './errors.js';

export const DEFAULT_IMAGE_MAX_BYTES = 20 * 1024 * 1024;
export const DEFAULT_IMAGE_FETCH_TIMEOUT_MS = 10_000;
// mtmd's budget for a Gemma 4 image when none is asked for.
export const DEFAULT_IMAGE_MAX_TOKENS = 280;
// An audio part's file: ten minutes of 16-bit 48 kHz stereo WAV fit.
export const DEFAULT_AUDIO_MAX_BYTES = 128 * 1024 * 1024;
// Items' rows kept for the next turn of a conversation, by their placeholder.
const CACHED_ITEMS = 16;

/** Whether a prompt id stands for an image's row. */
export const isPlaceholder = (id) => id < 0;

/**
 * Whether llama.cpp decodes Gemma 4 images with their rows attending each other both ways on the
 * sliding layers (mtmd_decode_use_non_causal): on every model but E2B and E4B, told by the
 * language model's width.
 * @example decodesNonCausal(5376) // true
 */
export function decodesNonCausal(nEmbdText) {
  return nEmbdText !== 1536 && nEmbdText !== 2560;
}

// A data: URL's bytes, or a 400 naming the part.
function dataUrlBytes(url, param, maxBytes) {
  const comma = url.indexOf(',');
  const head = url.slice(5, comma);
  if (comma < 0 || !/^image\/[a-z0-9.+-]+;base64$/i.test(head)) {
    throw badParam(param, `${param} must be a data:image/...;base64, URL (or an http(s) URL where the gateway fetches them)`);
  }
  const text = url.slice(comma + 1);
  return base64Bytes(text, param, maxBytes);
}

// An http(s) URL's body: an image/* answer of at most maxBytes within timeoutMs, else a 400.
async function fetchedBytes(url, param, { maxBytes, timeoutMs, signal }) {
  const fail = (why) => badParam(param, `${param}: ${why}`);
  let response;
  try {
    response = await fetch(url, { redirect: 'error', signal: deadlineSignal(signal, timeoutMs) });
  } catch (error) {
    if (signal?.aborted) throw signal.reason;
    throw fail(error.name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : `the fetch failed (${error.message})`);
  }
  if (!response.ok) throw fail(`the server answered ${response.status}`);
  if (!/^image\//i.test(response.headers.get('content-type') ?? '')) throw fail(`the server's answer is ${response.headers.get('content-type') ?? 'untyped'}, not an image`);
  const declared = Number(response.headers.get('content-length') ?? 0);
  if (declared > maxBytes) throw fail(`the image is ${declared} bytes, more than ${maxBytes}`);
  const parts = [];
  let size = 0;
  try {
    for await (const part of response.body) {
      size += part.byteLength;
      if (size > maxBytes) throw fail(`the image is more than ${maxBytes} bytes`);
      parts.push(part);
    }
  } catch (error) {
    if (error instanceof OpenAIError) throw error;
    if (signal?.aborted) throw signal.reason;
    throw fail(error.name === 'TimeoutError' ? `the image did not arrive within ${timeoutMs} ms` : `reading it failed (${error.message})`);
  } finally {
    await response.body?.cancel().catch(() => {});
  }
  const bytes = new Uint8Array(size);
  let at = 0;
  for (const part of parts) {
    bytes.set(part, at);
    at += part.byteLength;
  }
  return bytes;
}

// A 48-bit hash of a kind's head values and an item's bytes, as the negative placeholder id: an
// image's size and budget and its pixels, an audio clip's samples.
async function placeholderOf(head, bytes) {
  const data = new Uint8Array(head.byteLength + bytes.byteLength);
  data.set(new Uint8Array(head.buffer), 0);
  data.set(bytes, head.byteLength);
  const digest = new DataView(await crypto.subtle.digest('SHA-256', data));
  return -(digest.getUint32(0) * 2 ** 16 + digest.getUint16(4) + 1);
}

const AUDIO_HEAD = new Uint32Array([0x61756469]);  // keeps a clip's hash apart from any image's

// A base64 string's bytes, or a 400 naming the part.
function base64Bytes(text, param, maxBytes) {
  if (Math.floor(text.length * 3 / 4) > maxBytes) throw badParam(param, `${param} holds more than ${maxBytes} bytes`);
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text)) throw badParam(param, `${param} is not valid base64`);
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}

export class MediaInput {
  #vision;
  #audio;
  #cache = new Map();  // placeholder -> item, least recently used first

  /**
   * Over a projector's towers: vision a VisionEncoder (vision/encoder.js), audio an AudioEncoder
   * (audio/encoder.js) or null, or an encoder node's (remote_encoder.js). maxTokens: the
   * soft-token budget of an image whose part asks for none (70 to 1120; a part's detail "low" asks
   * for 70, "high" for 1120); fetchUrls: whether http(s) image URLs are fetched (else refused),
   * each within maxBytes and fetchTimeoutMs; maxPixels: the image decoders' limit; audioMaxBytes
   * and audioMaxSeconds an audio file's. Nodes taking images non-causally need a max span of
   * maxTokens (LayerNode.open's maxSpan), and an image of more soft tokens than maxSpan (the
   * pipeline's smallest) is refused; audio is decoded causally.
   * @example const media = new MediaInput({ vision, audio }, { maxTokens: 280 });
   */
  constructor({ vision, audio = null }, { maxTokens = DEFAULT_IMAGE_MAX_TOKENS, maxSpan = Infinity, fetchUrls = false, maxBytes = DEFAULT_IMAGE_MAX_BYTES,
    fetchTimeoutMs = DEFAULT_IMAGE_FETCH_TIMEOUT_MS, maxPixels = DEFAULT_MAX_IMAGE_PIXELS, audioMaxBytes = DEFAULT_AUDIO_MAX_BYTES,
    audioMaxSeconds = DEFAULT_MAX_AUDIO_SECONDS } = {}) {
    this.#vision = vision;
    this.#audio = audio;
    this.nonCausal = decodesNonCausal(vision.nEmbdText);
    Object.assign(this, { maxTokens, maxSpan, fetchUrls, maxBytes, fetchTimeoutMs, maxPixels, audioMaxBytes, audioMaxSeconds });
  }

  // The soft-token budget of an image part of this detail (OpenAI's levels).
  #budget(detail = 'auto') {
    return detail === 'low' ? IMAGE_MIN_TOKENS : detail === 'high' ? IMAGE_MAX_TOKENS : this.maxTokens;
  }

  /**
   * A media part read and decoded -> {kind, tokens, param, ...}: the soft tokens it will be, known
   * before it is encoded (encode()). An image part is {url, param} or, from a file, {bytes, param};
   * an audio part {type: 'audio', data (base64), param} or {type: 'audio', bytes, param} (param
   * names it in errors). A 400 naming the part for what cannot be read or decoded.
   * @example const read = await media.read({ url: 'data:image/png;base64,...', param: 'messages[0].content[1]' });
   */
  async read(part, { signal } = {}) {
    return part.type === 'audio' ? this.#readAudio(part) : this.#readImage(part, signal);
  }

  async #readImage({ url, bytes: given, detail = 'auto', param }, signal) {
    let bytes = given;
    if (bytes) {
      if (bytes.length > this.maxBytes) throw badParam(param, `${param} holds more than ${this.maxBytes} bytes`);
    } else if (/^data:/i.test(url)) {
      bytes = dataUrlBytes(url, param, this.maxBytes);
    } else if (/^https?:\/\//i.test(url)) {
      if (!this.fetchUrls) throw badParam(param, `${param}: this gateway fetches no image URLs (--image-urls); send the image as a data: URL`);
      bytes = await fetchedBytes(url, param, { maxBytes: this.maxBytes, timeoutMs: this.fetchTimeoutMs, signal });
    } else {
      throw badParam(param, `${param} must be a data: or http(s) URL`);
    }
    let image;
    try {
      image = await decodeImage(bytes, { maxPixels: this.maxPixels });
    } catch (error) {
      if (error instanceof ImageError) throw badParam(param, `${param}: ${error.message}`);
      throw error;
    }
    const maxTokens = this.#budget(detail);
    let tokens;
    try {
      ({ tokens } = this.#vision.tokens(image.width, image.height, { maxTokens }));
    } catch (error) {
      throw badParam(param, `${param}: ${error.message}`);
    }
    if (this.nonCausal && tokens > this.maxSpan) {
      throw badParam(param, `${param}: the image is ${tokens} soft tokens at detail ${JSON.stringify(detail)}; this gateway's nodes take ` +
        `images of up to ${this.maxSpan} (serve --max-span), so ask for a lower detail`);
    }
    return { kind: 'image', image, tokens, maxTokens, param };
  }

  async #readAudio({ data, bytes: given, param }) {
    if (!this.#audio) throw badParam(param, `${param}: the projector (--mmproj) has no audio encoder to read it with; Gemma 4's E2B and E4B hear`);
    if (given && given.length > this.audioMaxBytes) throw badParam(param, `${param} holds more than ${this.audioMaxBytes} bytes`);
    const bytes = given ?? base64Bytes(data, param, this.audioMaxBytes);
    let samples;
    try {
      ({ samples } = await decodeAudio(bytes, { maxSeconds: this.audioMaxSeconds, maxBytes: this.audioMaxBytes }));
    } catch (error) {
      if (error instanceof AudioError) throw badParam(param, `${param}: ${error.message}`);
      throw error;
    }
    let chunks;
    try {
      chunks = this.#audio.tokens(samples.length);
    } catch (error) {
      throw badParam(param, `${param}: ${error.message}`);
    }
    return { kind: 'audio', samples, tokens: chunks.reduce((a, b) => a + b, 0), param };
  }

  /**
   * A read item -> {placeholder, tokens, rows, span, kind}: rows [tokens, n_embd] of the language
   * model, span whether they are attended both ways; the item of the same image or clip is kept
   * for a while (the next turn of a conversation).
   * @example const item = await media.encode(await media.read(part));
   */
  async encode(read) {
    const placeholder = read.kind === 'audio'
      ? await placeholderOf(AUDIO_HEAD, new Uint8Array(read.samples.buffer, read.samples.byteOffset, read.samples.byteLength))
      : await placeholderOf(new Uint32Array([read.image.width, read.image.height, read.maxTokens]), read.image.rgb);
    const cached = this.#cache.get(placeholder);
    if (cached) {
      this.#cache.delete(placeholder);
      this.#cache.set(placeholder, cached);
      return cached;
    }
    const item = read.kind === 'audio'
      ? { placeholder, kind: 'audio', tokens: read.tokens, rows: (await this.#audio.encode(read.samples)).embd, span: false }
      : await this.#encodeImage(placeholder, read.image, read.maxTokens);
    this.#cache.set(placeholder, item);
    if (this.#cache.size > CACHED_ITEMS) this.#cache.delete(this.#cache.keys().next().value);
    return item;
  }

  async #encodeImage(placeholder, image, maxTokens) {
    const { tokens, embd } = await this.#vision.encode(image.rgb, image.width, image.height, { maxTokens });
    return { placeholder, kind: 'image', tokens, rows: embd, span: this.nonCausal };
  }
}

/**
 * Pipeline.step for ids that may hold media items' placeholders (items: placeholder -> item): each
 * run of tokens a step, each item's rows a stepMedia of their own; the options (Pipeline.step's) are
 * the last run's, the others' logits not asked for. -> the last run's answer, its timings and
 * embedMs those of every run (each node's times summed)
 * @example const { logits } = await stepWithMedia(pipeline, 'chat-0', prompt, items, { signal });
 */
export async function stepWithMedia(pipeline, session, ids, items, options = {}) {
  if (!ids.some(isPlaceholder)) return pipeline.step(session, ids, options);
  const runs = mediaRuns(ids, items);
  let out = null;
  let embedMs = 0;
  const byNode = new Map();  // first layer -> the node's timings summed over the runs
  for (const [k, run] of runs.entries()) {
    const these = k === runs.length - 1 ? options : { logits: false, signal: options.signal, trace: options.trace };
    out = run.item
      ? await pipeline.stepMedia(session, { rows: run.item.rows, span: run.item.span }, these)
      : await pipeline.step(session, run.tokens, these);
    embedMs += out.embedMs;
    for (const t of out.timings) {
      const sum = byNode.get(t.layers[0]);
      byNode.set(t.layers[0], sum ? { ...t, ms: sum.ms + t.ms, layerMs: t.layerMs.map((ms, l) => ms + (sum.layerMs[l] ?? 0)) } : t);
    }
  }
  return { ...out, timings: [...byNode.values()], embedMs };
}

/**
 * A step's ids -> its runs in order: {tokens} of real ids, or {item} for a media item's run of
 * placeholders (`items`: placeholder -> item). Throws when a run is not its image's length.
 * @example mediaRuns([2, 5, -7, -7, 9], new Map([[-7, item]])) // [{tokens: [2, 5]}, {item}, {tokens: [9]}]
 */
export function mediaRuns(ids, items) {
  const runs = [];
  for (let i = 0; i < ids.length;) {
    let j = i + 1;
    if (isPlaceholder(ids[i])) {
      while (j < ids.length && ids[j] === ids[i]) j++;
      const item = items.get(ids[i]);
      if (!item || item.tokens !== j - i) throw new Error(`internal: a media item's run of ${j - i} placeholders has no item of that length`);
      runs.push({ item });
    } else {
      while (j < ids.length && !isPlaceholder(ids[j])) j++;
      runs.push({ tokens: ids.slice(i, j) });
    }
    i = j;
  }
  return runs;
}
