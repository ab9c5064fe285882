// A remote layer node's answer, read and checked before anything of it is used: a node may be
// broken, overloaded or hostile, and what it sends would otherwise reach a session's history,
// the next node and the sampler. The size is known before the body is read (the caller says
// how many bytes it asked for), so a Content-Length other than that is refused before a byte
// is read and a body without one is cut off as soon as it runs over: a node can make the
// gateway hold no more than the answer it was asked for. Every value must then be a number the
// next step can compute with. docs/gateway.md, "What a node may answer".
import { firstNonFiniteKvByte } from '../protocol/kv_rows.js';
import { LayerfoldError } from '../wasm/capi.js';

/**
 * Largest magnitude accepted in hidden states, per-layer inputs and logits. A finite but huge
 * value is as much garbage as a NaN, and turns into one downstream: the next layer's RMSNorm
 * sums a row's squares (1e30 · n_embd stays below float32's 3.4e38 for any n_embd under 1e8),
 * a temperature divides the logits. A working model's values are many orders of magnitude smaller.
 */
export const MAX_ABS_VALUE = 1e15;

/** Bound of a node's JSON answer or error body (its /v1/info, a truncate's answer, an error). */
export const MAX_JSON_BYTES = 1 << 20;

function badAnswer(message) {
  return new LayerfoldError('bad_response', message);
}

// A read that failed: the caller's abort (its reason, as is), else the connection broke or the
// per-request timeout fired mid-body.
function readFailure(error, signal, what, received) {
  if (signal?.aborted) return signal.reason;
  const cause = error.name === 'TimeoutError' ? 'no answer in time' : (error.cause?.code ?? error.message);
  return new LayerfoldError('unavailable', `${what}: the answer broke off after ${received} bytes (${cause})`);
}

/**
 * The body of `response` as one ArrayBuffer of exactly `bytes` bytes, or a 'bad_response'
 * error naming what was wrong: a Content-Length other than `bytes` (refused unread), more bytes
 * than that (the read is cancelled at once), fewer. `signal` is the one the fetch was made with:
 * its abort ends the read with its reason.
 * @example const buffer = await readExact(response, 4 * rows * nVocab, 'logits', signal);
 */
export async function readExact(response, bytes, what, signal) {
  const declared = response.headers.get('content-length');
  if (declared !== null && Number(declared) !== bytes) {
    await response.body?.cancel().catch(() => {});
    throw badAnswer(`${what}: the answer declares ${declared.slice(0, 20)} bytes (Content-Length), expected ${bytes}`);
  }
  const out = new Uint8Array(bytes);
  const { received, over } = await readInto(response, bytes, what, signal, (chunk, at) => out.set(chunk, at));
  if (over) throw badAnswer(`${what}: the answer runs past the ${bytes} bytes expected`);
  if (received < bytes) throw badAnswer(`${what}: the answer ended after ${received} bytes, expected ${bytes}`);
  return out.buffer;
}

/**
 * A node's JSON answer (at most maxBytes), parsed; 'bad_response' when larger or not JSON.
 * @example const info = await readJson(response, MAX_JSON_BYTES, 'GET /v1/info', signal);
 */
export async function readJson(response, maxBytes, what, signal) {
  const text = await readText(response, maxBytes, what, signal);
  if (text === null) throw badAnswer(`${what}: the answer is larger than ${maxBytes} bytes`);
  try {
    return JSON.parse(text);
  } catch (error) {
    throw badAnswer(`${what}: the answer is not JSON (${error.message})`);
  }
}

/**
 * The body as text, or null when it runs over maxBytes (the read is cancelled there).
 * @example const text = await readText(response, 65536, 'POST /v1/logits', signal);
 */
export async function readText(response, maxBytes, what, signal) {
  const declared = response.headers.get('content-length');
  if (declared !== null && Number(declared) > maxBytes) {
    await response.body?.cancel().catch(() => {});
    return null;
  }
  const chunks = [];
  const { over } = await readInto(response, maxBytes, what, signal, (chunk) => chunks.push(chunk));
  if (over) return null;
  const decoder = new TextDecoder();
  return chunks.map((chunk) => decoder.decode(chunk, { stream: true })).join('') + decoder.decode();
}

// Reads the body chunk by chunk into put(chunk, offset) while it stays within maxBytes ->
// {received, over}; the first chunk past maxBytes cancels the read (over: true) and is not put.
async function readInto(response, maxBytes, what, signal, put) {
  if (response.body === null) return { received: 0, over: false };
  const reader = response.body.getReader();
  let received = 0;
  try {
    for (;;) {
      let step;
      try {
        step = await reader.read();
      } catch (error) {
        throw readFailure(error, signal, what, received);
      }
      if (step.done) return { received, over: false };
      if (received + step.value.byteLength > maxBytes) {
        await reader.cancel().catch(() => {});
        return { received, over: true };
      }
      put(step.value, received);
      received += step.value.byteLength;
    }
  } finally {
    reader.releaseLock();
  }
}

/**
 * Throws 'bad_response' naming the first value of `floats` (rows of `width`) that is not
 * finite or beyond ±MAX_ABS_VALUE.
 * @example checkValues(logits, nVocab, 'logits');
 */
export function checkValues(floats, width, what) {
  for (let i = 0; i < floats.length; i++) {
    const x = floats[i];
    // Written so that NaN fails it too.
    if (!(Math.abs(x) <= MAX_ABS_VALUE)) {
      const kind = Number.isFinite(x) ? `beyond ±${MAX_ABS_VALUE}` : 'not finite';
      throw badAnswer(`${what}: value ${x} at row ${Math.floor(i / width)}, column ${i % width} is ${kind}`);
    }
  }
}

/**
 * Throws 'bad_response' naming the first f16 of a layer's K/V rows (bytesPerToken a position, in
 * the cache types of `types`) that is an infinity or a NaN.
 * @example checkKvRowValues(kvRows[13], 1024, { cacheTypeK: 'q8_0', cacheTypeV: 'q8_0' }, 'layer 13 K/V rows');
 */
export function checkKvRowValues(bytes, bytesPerToken, types, what) {
  const at = firstNonFiniteKvByte(bytes, bytesPerToken, types);
  if (at >= 0) {
    const bits = bytes[at] | (bytes[at + 1] << 8);
    throw badAnswer(`${what}: the f16 at byte ${at} (0x${bits.toString(16)}) is not finite`);
  }
}
