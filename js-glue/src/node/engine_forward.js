// A LayerNode's forward calls into the engine, over WASM memory: a call alone (lf_forward, or
// lf_forward_async on the threaded build), a batch of calls of different sessions
// (lf_forward_batch / lf_forward_batch_async, docs/batching.md), and the LM head on the engine's
// threads (lf_head_async). The threaded build's calls return
// at once and flip a done flag in WASM memory, awaited here without blocking the event loop.
import { errorOfCode, LayerfoldError } from '../wasm/capi.js';
import { flagSet } from '../wasm/done_flag.js';

const F32 = 4;

/**
 * Runs fn(inPtr, outPtr) with `input` copied into WASM memory and `outFloats` floats copied out;
 * fn returns the C call's status (0: its last error is thrown).
 * @example const hidden = withBuffers(lf, ids, ids.length * nEmbd, (inPtr, outPtr) => lf.fn.lf_embed(model, inPtr, ids.length, outPtr));
 */
export function withBuffers(lf, input, outFloats, fn) {
  const inPtr = lf.alloc(input.byteLength);
  const outPtr = lf.alloc(outFloats * F32);
  try {
    lf.bytes().set(new Uint8Array(input.buffer, input.byteOffset, input.byteLength), inPtr);
    if (!fn(inPtr, outPtr)) throw lf.lastError();
    return new Float32Array(lf.bytes().slice(outPtr, outPtr + outFloats * F32).buffer);
  } finally {
    lf.free(inPtr);
    lf.free(outPtr);
  }
}

// The threaded build's whole-call failure, which lf_forward_async_result makes the last error.
function asyncFailure(lf, model) {
  lf.fn.lf_forward_async_result(model);
  return lf.lastError();
}

/**
 * One call alone: the session `handle` (an lf_session*) runs call.hidden [rows, n_embd] from
 * call.startPos -> its output [rows or 1, n_embd]; rejects with the engine's error.
 * @example const out = await forwardOne(lf, model, { handle, call: { startPos: 0, hidden, rows: 3, lastOnly: true } });
 */
export async function forwardOne(lf, model, { handle, call: { startPos, hidden, rows, lastOnly } }) {
  const outFloats = (lastOnly ? 1 : rows) * (hidden.length / rows);
  if (lf.kind !== 'threaded') {
    return withBuffers(lf, hidden, outFloats, (inPtr, outPtr) => lf.fn.lf_forward(model, handle, startPos, inPtr, rows, outPtr, lastOnly ? 1 : 0));
  }
  return withBuffersAsync(lf, model, hidden, outFloats,
    (inPtr, outPtr, flagPtr) => lf.fn.lf_forward_async(model, handle, startPos, inPtr, rows, outPtr, lastOnly ? 1 : 0, flagPtr));
}

// withBuffers for the threaded build's calls that return at once: start(inPtr, outPtr, flagPtr)
// makes the C call, whose done flag is then awaited.
async function withBuffersAsync(lf, model, input, outFloats, start) {
  const inPtr = lf.alloc(input.byteLength);
  const outPtr = lf.alloc(outFloats * F32);
  const flagPtr = lf.alloc(4);
  try {
    lf.bytes().set(new Uint8Array(input.buffer, input.byteOffset, input.byteLength), inPtr);
    if (!start(inPtr, outPtr, flagPtr)) throw lf.lastError();
    if (await flagSet(lf, flagPtr) !== 1) throw asyncFailure(lf, model);
    return new Float32Array(lf.bytes().slice(outPtr, outPtr + outFloats * F32).buffer);
  } finally {
    lf.free(inPtr);
    lf.free(outPtr);
    lf.free(flagPtr);
  }
}

/**
 * Several calls of different sessions in one engine forward, their rows in entry order ->
 * each entry's {value: its output} or {error: its own error}, as the engine finished it
 * (lf_forward_batch_result_json). Throws only when the engine refused the call as a whole.
 * @example const [a, b] = await forwardBatch(lf, model, [{ handle: h1, call: c1 }, { handle: h2, call: c2 }]);
 */
export async function forwardBatch(lf, model, entries) {
  const k = entries.length;
  const nEmbd = entries[0].call.hidden.length / entries[0].call.rows;
  const outRows = entries.map(({ call }) => (call.lastOnly ? 1 : call.rows));
  const inFloats = entries.reduce((sum, { call }) => sum + call.hidden.length, 0);
  const outFloats = outRows.reduce((sum, r) => sum + r, 0) * nEmbd;
  const held = [];
  const alloc = (bytes) => {
    const ptr = lf.alloc(bytes);
    held.push(ptr);
    return ptr;
  };
  try {
    const [sessionsPtr, startPtr, nPtr, lastPtr] = [0, 1, 2, 3].map(() => alloc(4 * k));
    const inPtr = alloc(inFloats * F32);
    const outPtr = alloc(outFloats * F32);
    const flagPtr = alloc(4);
    // Views made after the last alloc, which may have grown the memory.
    const i32 = new Int32Array(lf.bytes().buffer);
    const f32 = new Float32Array(lf.bytes().buffer);
    let at = inPtr >> 2;
    entries.forEach(({ call, handle }, i) => {
      i32[(sessionsPtr >> 2) + i] = handle;
      i32[(startPtr >> 2) + i] = call.startPos;
      i32[(nPtr >> 2) + i] = call.rows;
      i32[(lastPtr >> 2) + i] = call.lastOnly ? 1 : 0;
      f32.set(call.hidden, at);
      at += call.hidden.length;
    });
    const args = [model, k, sessionsPtr, startPtr, nPtr, lastPtr, inPtr, outPtr];
    if (lf.kind === 'threaded') {
      if (!lf.fn.lf_forward_batch_async(...args, flagPtr)) throw lf.lastError();
      if (await flagSet(lf, flagPtr) !== 1) throw asyncFailure(lf, model);
    } else if (!lf.fn.lf_forward_batch(...args)) {
      throw lf.lastError();
    }
    const finished = lf.json(lf.fn.lf_forward_batch_result_json(model));
    if (finished.length !== k) throw new LayerfoldError('internal', `a batch of ${k} entries came back with ${finished.length} outcomes`);
    const heap = lf.bytes();
    let end = outPtr;
    return finished.map(({ code, message }, i) => {
      const bytes = outRows[i] * nEmbd * F32;
      end += bytes;
      return code === 0 ? { value: new Float32Array(heap.slice(end - bytes, end).buffer) } : { error: errorOfCode(code, message) };
    });
  } finally {
    for (const ptr of held) lf.free(ptr);
  }
}

/**
 * The LM head over hidden [rows, n_embd] -> logits [rows, n_vocab] on the engine's threads
 * (lf_head_async; lf_head on the single-thread build), without blocking the event loop.
 * @example const logits = await headAsync(lf, model, hidden, rows, nVocab);
 */
export async function headAsync(lf, model, hidden, rows, nVocab) {
  if (lf.kind !== 'threaded') return withBuffers(lf, hidden, rows * nVocab, (inPtr, outPtr) => lf.fn.lf_head(model, inPtr, rows, outPtr));
  return withBuffersAsync(lf, model, hidden, rows * nVocab, (inPtr, outPtr, flagPtr) => lf.fn.lf_head_async(model, inPtr, rows, outPtr, flagPtr));
}
