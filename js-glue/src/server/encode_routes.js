// An encoder node's calls (docs/http-api.md, "Encoding media"): a node served with the model's
// projector (serve --mmproj) encodes images and audio clips for a gateway that holds no tower
// (gateway --encoder, the edge gateway's ENCODER_URL). Each call is checked as the layer routes
// are, everything before its body is read: the query's sizes against the tower's config (the
// tokens it will answer known from them alone), the content type, admission to the node's queue,
// then the body within the exact length its query gives (a clip: its limit) and its values. The
// encodes run one after another in a line of their own, beside the layer calls.
import { Hono } from 'hono';

import { CLIP_SAMPLE_RATE, clipTokens } from '../protocol/clip_tokens.js';
import { imageBodyBytes, readImageQuery } from '../protocol/encode_body.js';
import { imageTokens } from '../protocol/image_tokens.js';
import { checkDeclaredLength } from './request_body.js';
import { HttpError } from './http_error.js';
import { contentType, finiteValues } from './request_checks.js';

const F32 = 4;
const OCTETS = 'application/octet-stream';
const ENCODES = Symbol('the line of encodes');

// The node's encoder ({vision, audio, config, maxImagePixels, maxAudioSeconds}), or a 404 saying
// how to serve one.
function encoderOf(state, kind) {
  const encoder = state.encoder;
  if (!encoder) throw new HttpError('not_found', `this node encodes no ${kind}: serve it with --mmproj, the model's projector`);
  if (kind === 'audio' && !encoder.audio) throw new HttpError('not_found', 'this node\'s projector has no audio encoder: Gemma 4\'s E2B and E4B hear');
  return encoder;
}

// A RangeError of a token count (the engine's words) as the 400 it is.
function counted(count) {
  try {
    return count();
  } catch (error) {
    if (error instanceof RangeError) throw new HttpError('bad_parameter', error.message);
    throw error;
  }
}

/**
 * The encode routes, for the layer-node app to mount at /v1/encode after its authentication and
 * readiness checks. withBody(c, handle, limit) admits the request and reads its body within
 * limit ({maxBytes, describeLimit}); engine(ticket, job, line) runs an engine call in the queue's
 * order; answer(c, ticket, bytes, headers) streams the answer.
 * @example app.route('/v1/encode', encodeRoutes({ state, withBody, engine, answer }));
 */
export function encodeRoutes({ state, withBody, engine, answer }) {
  const routes = new Hono();

  routes.post('/image', async (c) => {
    const encoder = encoderOf(state, 'images');
    const { width, height, maxTokens } = readImageQuery(c.req.query());
    if (width * height > encoder.maxImagePixels) {
      throw new HttpError('bad_parameter', `an image of ${width} x ${height} = ${width * height} pixels: this node encodes at most ${encoder.maxImagePixels}`);
    }
    const { tokens } = counted(() => imageTokens(encoder.config.vision, width, height, { maxTokens }));
    const bytes = imageBodyBytes(width, height);
    const describeLimit = () => `an image of ${width} x ${height} is ${bytes} RGB bytes`;
    checkDeclaredLength(c.req.raw, bytes, describeLimit);
    contentType(c.req.header('content-type'), OCTETS);
    return withBody(c, async (body, ticket) => {
      if (body.byteLength !== bytes) throw new HttpError('bad_length', `body of ${body.byteLength} bytes: ${describeLimit()} (height · width · 3)`);
      const { embd } = await engine(ticket, () => encoder.vision.encode(new Uint8Array(body), width, height, { maxTokens }), ENCODES);
      return answer(c, ticket, embd, { 'content-type': OCTETS, 'x-layerfold-tokens': String(tokens) });
    }, { maxBytes: bytes, describeLimit });
  });

  routes.post('/audio', async (c) => {
    const encoder = encoderOf(state, 'audio');
    const maxBytes = encoder.maxAudioSeconds * CLIP_SAMPLE_RATE * F32;
    const describeLimit = () => `this node encodes clips of at most ${encoder.maxAudioSeconds} s, ${maxBytes} bytes of 16 kHz f32 samples`;
    checkDeclaredLength(c.req.raw, maxBytes, describeLimit);
    contentType(c.req.header('content-type'), OCTETS);
    return withBody(c, async (body, ticket) => {
      if (body.byteLength === 0 || body.byteLength % F32 !== 0) {
        throw new HttpError('bad_length', `body of ${body.byteLength} bytes: expected a positive multiple of 4 bytes (16 kHz mono f32 samples)`);
      }
      const samples = finiteValues(new Float32Array(body), 1, 'samples');
      const tokens = counted(() => clipTokens(samples.length)).reduce((a, b) => a + b, 0);
      const { embd } = await engine(ticket, () => encoder.audio.encode(samples), ENCODES);
      return answer(c, ticket, embd, { 'content-type': OCTETS, 'x-layerfold-tokens': String(tokens) });
    }, { maxBytes, describeLimit });
  });

  for (const path of ['/image', '/audio']) {
    routes.all(path, (c) => {
      throw new HttpError('method_not_allowed', `${c.req.method} /v1/encode${path}: allowed POST`, { headers: { allow: 'POST' } });
    });
  }
  return routes;
}
