// The C ABI as seen from JS: every exported function listed once, bound once; C status codes
// become Errors with a stable `code`.
const CODES = ['ok', 'invalid_argument', 'malformed', 'unsupported', 'need_more_data', 'io_error',
  'failed_precondition', 'resource_exhausted', 'not_found', 'internal'];

const EXPORTS = [
  'lf_last_error_code', 'lf_last_error_message', 'lf_alloc', 'lf_free', 'lf_version', 'lf_kernel_isa', 'lf_kernel_dot_form',
  'lf_gguf_parse', 'lf_gguf_needed_bytes', 'lf_gguf_json', 'lf_gguf_free',
  'lf_model_info_json', 'lf_node_needs_json', 'lf_model_create', 'lf_model_place_tensor', 'lf_model_load',
  'lf_model_set_threads', 'lf_model_threads', 'lf_model_set_ffn_down_layout', 'lf_model_set_per_layer_rows', 'lf_model_set_kv_types', 'lf_model_set_max_span',
  'lf_model_n_embd', 'lf_model_n_vocab', 'lf_model_n_layer', 'lf_model_free',
  'lf_session_create', 'lf_session_n_past', 'lf_session_bytes', 'lf_session_kv_digest', 'lf_session_free', 'lf_session_truncate', 'lf_session_checkpoint', 'lf_session_timings_json',
  'lf_model_worker_timings_json', 'lf_session_set_approx', 'lf_session_set_exit_state', 'lf_session_approx_stats',
  'lf_embed', 'lf_per_layer_inputs', 'lf_per_layer_inputs_from_rows', 'lf_session_set_per_layer_inputs',
  'lf_session_set_span', 'lf_session_set_kv_rows', 'lf_session_clear_kv_rows', 'lf_session_kv_rows_bytes', 'lf_session_kv_rows', 'lf_forward',
  'lf_forward_async', 'lf_forward_async_result', 'lf_forward_batch', 'lf_forward_batch_async', 'lf_forward_batch_result_json',
  'lf_head', 'lf_head_async',
  'lf_drafter_create', 'lf_drafter_place_tensor', 'lf_drafter_set_threads', 'lf_drafter_load', 'lf_drafter_step',
  'lf_drafter_draft', 'lf_drafter_free',
  'lf_vision_create', 'lf_vision_n_embd_text', 'lf_vision_tokens', 'lf_vision_encode_async', 'lf_vision_encode_result', 'lf_vision_free',
  'lf_audio_create', 'lf_audio_n_embd_text', 'lf_audio_tokens', 'lf_audio_encode_async', 'lf_audio_encode_result', 'lf_audio_free',
  'lf_member_tensors_json', 'lf_member_needs_json', 'lf_member_create', 'lf_member_place_tensor', 'lf_member_load', 'lf_member_set_kv_types', 'lf_member_session_create',
  'lf_member_free', 'lf_member_begin', 'lf_member_call_layer', 'lf_member_call_phase', 'lf_member_piece',
  'lf_member_piece_floats', 'lf_member_put_piece', 'lf_member_step', 'lf_member_output', 'lf_member_call_free',
  'lf_member_begin_async', 'lf_member_step_async', 'lf_member_phase_end',
  'lf_member_vocab_begin', 'lf_member_vocab_end', 'lf_member_embed', 'lf_member_per_layer_inputs', 'lf_member_head',
  'lf_model_read_probe_async', 'lf_model_read_probe_json',
  'lf_tokenizer_create', 'lf_tokenize', 'lf_tokenize_untrusted', 'lf_detokenize', 'lf_tokenizer_n_vocab',
  'lf_tokenizer_max_token_bytes', 'lf_tokenizer_bos', 'lf_tokenizer_eos', 'lf_tokenizer_piece', 'lf_tokenizer_free',
];

// Exports that return a pointer (or handle) into WASM memory.
const POINTER_RESULTS = new Set([
  'lf_last_error_message', 'lf_alloc', 'lf_version', 'lf_kernel_isa', 'lf_kernel_dot_form', 'lf_gguf_parse', 'lf_gguf_json',
  'lf_model_info_json', 'lf_node_needs_json', 'lf_model_create', 'lf_session_create', 'lf_session_timings_json',
  'lf_model_worker_timings_json', 'lf_session_approx_stats', 'lf_model_read_probe_json', 'lf_forward_batch_result_json', 'lf_tokenizer_create',
  'lf_tokenizer_piece', 'lf_session_kv_rows', 'lf_drafter_create', 'lf_member_tensors_json', 'lf_member_needs_json', 'lf_member_create',
  'lf_member_session_create', 'lf_member_begin', 'lf_member_begin_async', 'lf_member_piece', 'lf_member_output',
  'lf_vision_create', 'lf_audio_create',
]);

export class LayerfoldError extends Error {
  constructor(code, message) {
    super(message);
    this.name = 'LayerfoldError';
    this.code = code;
  }
}

/**
 * The error of a C status code as lf_last_error_code numbers it (and the JSON outcomes of
 * lf_forward_batch_result_json), with its message.
 * @example errorOfCode(6, 'start_pos 3 does not match the session\'s n_past 5').code // 'failed_precondition'
 */
export function errorOfCode(code, message) {
  return new LayerfoldError(CODES[code] ?? 'internal', message);
}

/**
 * Binds every export of an instantiated module. close() releases what the module holds beyond
 * its memory (the threaded build's pthread pool), so a script that loaded it can exit.
 * json(ptr) reads the JSON answer of a *_json export, or throws its last error when it is NULL.
 * @example const lf = bindCapi({ kind: 'single', threads: 1, memory: () => m.buffer, call: (n) => exports[n], raw: instance });
 *   const info = lf.json(lf.fn.lf_model_info_json(gguf));
 */
export function bindCapi({ kind, threads, memory, call, raw, close = () => {} }) {
  const fn = {};
  for (const name of EXPORTS) {
    const f = call(name);
    if (typeof f !== 'function') throw new Error(`layerfold module lacks export ${name}: rebuild with scripts/build`);
    // wasm32 returns pointers as i32: above 2 GiB they would come back negative.
    fn[name] = POINTER_RESULTS.has(name) ? (...args) => f(...args) >>> 0 : f;
  }
  const bytes = () => new Uint8Array(memory());
  const readCString = (ptr) => {
    const heap = bytes();
    let end = ptr;
    while (end < heap.length && heap[end] !== 0) end++;
    if (end >= heap.length) throw new Error(`readCString: no string at ${ptr} (memory is ${heap.length} bytes)`);
    // Copy first: TextDecoder refuses views of a SharedArrayBuffer.
    return new TextDecoder().decode(heap.slice(ptr, end));
  };
  const lastError = () => errorOfCode(fn.lf_last_error_code(), readCString(fn.lf_last_error_message()));
  const json = (ptr) => {
    if (!ptr) throw lastError();
    return JSON.parse(readCString(ptr));
  };
  const alloc = (n) => {
    const ptr = fn.lf_alloc(n);
    if (!ptr) throw lastError();
    return ptr;
  };
  return { kind, threads, fn, bytes, readCString, json, lastError, alloc, free: (p) => fn.lf_free(p), raw, close };
}
