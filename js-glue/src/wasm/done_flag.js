// A done flag in WASM memory: an int32 the engine's async calls set when their work is over
// (capi.h: lf_forward_async, lf_head_async, lf_vision_encode_async, ...).

/**
 * The value a done flag (set to 0 by the C call) flips to, awaited without blocking the event
 * loop. The single-thread build has set it before its call returned.
 * @example if (await flagSet(lf, flagPtr) !== 1) throw lf.lastError();
 */
export async function flagSet(lf, flagPtr) {
  const flag = () => new Int32Array(lf.bytes().buffer);
  if (Atomics.load(flag(), flagPtr >> 2) === 0) {
    const wait = Atomics.waitAsync(flag(), flagPtr >> 2, 0);
    if (wait.async) await wait.value;
  }
  return Atomics.load(flag(), flagPtr >> 2);
}
