// Values a host copies into WASM memory for one C call, freed once the call returns: a C
// string, typed arrays, a JSON argument. (A forward's buffers in and out: node/engine_forward.js.)

/**
 * text as a NUL-terminated UTF-8 string in WASM memory; the caller frees it.
 * @example const ptr = cString(lf, 'features'); try { lf.fn.lf_model_set_ffn_down_layout(model, ptr); } finally { lf.free(ptr); }
 */
export function cString(lf, text) {
  const encoded = new TextEncoder().encode(`${text}\0`);
  const ptr = lf.alloc(encoded.length);
  lf.bytes().set(encoded, ptr);
  return ptr;
}

/**
 * Runs fn(pointers) with each of `texts` as a NUL-terminated C string in WASM memory; returns
 * what fn returns.
 * @example withCStrings(lf, ['q8_0', 'f16'], ([k, v]) => lf.fn.lf_model_set_kv_types(model, k, v));
 */
export function withCStrings(lf, texts, fn) {
  const ptrs = texts.map((text) => cString(lf, text));
  try {
    return fn(ptrs);
  } finally {
    for (const ptr of ptrs) lf.free(ptr);
  }
}

/**
 * Runs fn(pointers) with each typed array of `arrays` copied into WASM memory; returns what fn
 * returns. An empty array still gets an allocation of its own, so its pointer is never null.
 * @example withCopies(lf, [ids], ([idsPtr]) => lf.fn.lf_embed(model, idsPtr, ids.length, outPtr));
 */
export function withCopies(lf, arrays, fn) {
  const ptrs = arrays.map((a) => {
    const ptr = lf.alloc(Math.max(4, a.byteLength));
    lf.bytes().set(new Uint8Array(a.buffer, a.byteOffset, a.byteLength), ptr);
    return ptr;
  });
  try {
    return fn(ptrs);
  } finally {
    for (const ptr of ptrs) lf.free(ptr);
  }
}

/**
 * fn(handle, json) with `value` as a JSON C string; a 0 status throws the module's last error.
 * @example callWithJson(lf, lf.fn.lf_session_set_approx, session, { early_exit: true });
 */
export function callWithJson(lf, fn, handle, value) {
  const json = cString(lf, JSON.stringify(value));
  try {
    if (!fn(handle, json)) throw lf.lastError();
  } finally {
    lf.free(json);
  }
}
