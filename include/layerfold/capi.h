/* The C ABI of layerfold: the only surface the JS host (and any other host) calls.
 * Every function that can fail returns 0 / NULL on failure; lf_last_error_code() and
 * lf_last_error_message() then say why (per thread). Pointers into wasm memory returned here
 * stay valid until the owning handle is freed. The exported names are also listed, as data,
 * in the JS host's binding of this ABI (js-glue). */
#ifndef LAYERFOLD_CAPI_H
#define LAYERFOLD_CAPI_H

#include <stddef.h>
#include <stdint.h>

#if defined(__EMSCRIPTEN__)
#include <emscripten/emscripten.h>
#define LF_EXPORT(name) EMSCRIPTEN_KEEPALIVE
#elif defined(__wasm__)
#define LF_EXPORT(name) __attribute__((export_name(#name)))
#else
#define LF_EXPORT(name) __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lf_gguf lf_gguf;
typedef struct lf_model lf_model;
typedef struct lf_session lf_session;

/* --- errors and memory --- */
LF_EXPORT(lf_last_error_code) int lf_last_error_code(void);
LF_EXPORT(lf_last_error_message) const char* lf_last_error_message(void);
/* n_bytes is a double so that a JS number is never cut to 32 bits: NULL (resource_exhausted)
 * beyond what the module can address. */
LF_EXPORT(lf_alloc) void* lf_alloc(double n_bytes);
LF_EXPORT(lf_free) void lf_free(void* ptr);
LF_EXPORT(lf_version) const char* lf_version(void);
/* Which matmul kernels this build has: "wasm-relaxed-simd", "wasm-simd128", "sse2" or "scalar". */
LF_EXPORT(lf_kernel_isa) const char* lf_kernel_isa(void);
/* The relaxed kernels' form of the Q4_0 dot product (docs/kernels.md, "Two forms of the dot
 * product"; same bits either way): form NULL times both and runs the faster, "dot-add" or
 * "pairs" forces one. Call once, before any forward. JSON owned by the module until the next
 * call: {"form"} and, when timed, {"dot_add_ms", "pairs_ms"}; "form" null where the relaxed
 * kernels do not run (then a named form is refused). NULL with the error on an unknown name. */
LF_EXPORT(lf_kernel_dot_form) const char* lf_kernel_dot_form(const char* form);

/* --- GGUF header: parse a prefix of a file of file_size bytes --- */
/* Returns NULL on error; with code need_more_data, lf_gguf_needed_bytes() says how many. */
LF_EXPORT(lf_gguf_parse) lf_gguf* lf_gguf_parse(const uint8_t* data, double size, double file_size);
LF_EXPORT(lf_gguf_needed_bytes) double lf_gguf_needed_bytes(void);
/* Metadata and tensor table as JSON (UTF-8, NUL-terminated), owned by the handle. */
LF_EXPORT(lf_gguf_json) const char* lf_gguf_json(lf_gguf* gguf, int include_large_arrays);
LF_EXPORT(lf_gguf_free) void lf_gguf_free(lf_gguf* gguf);

/* --- what a node needs, from the header alone; each answer is JSON owned by gguf until the
 * next call of any of these three on it; NULL with the last error when the header is not a model
 * the engine runs, or the range is not inside it --- */
/* The configuration as the engine reads it: {"arch": "gemma4", "n_layer", "n_embd", ..., "layers":
 * [{"sliding", "n_head", ...}, ...]}, every field as js-glue/src/gguf/model_info.schema.json declares it. */
LF_EXPORT(lf_model_info_json) const char* lf_model_info_json(lf_gguf* gguf);
/* Names of the tensors a node of layers [begin, end) loads, as a JSON array. per_layer_rows: the
 * first node of a model with per-layer embeddings reads per_layer_token_embd by rows
 * (lf_model_set_per_layer_rows), so the table is not among them. */
LF_EXPORT(lf_node_tensors_json) const char* lf_node_tensors_json(lf_gguf* gguf, int layer_begin, int layer_end,
                                                                 int with_embedding, int with_head, int per_layer_rows);
/* The bytes such a node holds (model/node_needs.h): {"tensor_bytes", "kv_bytes_per_session" (one
 * session at max_ctx; 0: the model's n_ctx_train), "scratch_bytes" (a forward of max_tokens rows,
 * top-K FFN included; the cache in types k_type and v_type, as lf_model_set_kv_types names them,
 * NULL: f16) plus "scratch_bytes_per_worker" for each thread, "relayout_bytes" (while
 * loading only, freed before any session exists), "per_layer_row_bytes" (the first node of a
 * model with per-layer embeddings: one token's row of per_layer_token_embd, what a cache of rows
 * is budgeted by; else 0), "kv_rows_in" and "kv_rows_out" (shared KV across nodes: the source
 * layers whose K/V rows the node takes, its mirrors being in kv_bytes_per_session, and those whose
 * rows it hands out, [{"layer", "bytes_per_token"}]; see lf_session_set_kv_rows), "tensors" (as
 * lf_node_tensors_json)}; max_span as lf_model_set_max_span. */
LF_EXPORT(lf_node_needs_json) const char* lf_node_needs_json(lf_gguf* gguf, int layer_begin, int layer_end,
                                                             int with_embedding, int with_head, int max_ctx,
                                                             int max_tokens, int per_layer_rows, const char* k_type,
                                                             const char* v_type, int max_span);

/* --- a node's model: the host places tensor bytes in memory, then loads a layer range --- */
LF_EXPORT(lf_model_create) lf_model* lf_model_create(void);
/* Records where tensor `name` (NUL-terminated) lives; the bytes must outlive the model. */
LF_EXPORT(lf_model_place_tensor) int lf_model_place_tensor(lf_model* model, const char* name, const uint8_t* data);
LF_EXPORT(lf_model_load) int lf_model_load(lf_model* model, lf_gguf* gguf, int layer_begin, int layer_end,
                                           int with_embedding, int with_head);
/* Workers of the model's thread pool (docs/threads.md): before lf_model_load it sets the count the
 * pool starts with, after it restarts the pool (not while a forward runs). Outputs are
 * byte-identical for every count. In the wasm32-wasi build the pool always has one worker. */
LF_EXPORT(lf_model_set_threads) int lf_model_set_threads(lf_model* model, int n_threads);
LF_EXPORT(lf_model_threads) int lf_model_threads(const lf_model* model);
/* How lf_model_load lays out ffn_down: "units" (default: unit-major, docs/threads.md) or
 * "features" (feature-major where its type allows: the top-K gate FFN of docs/approximate.md
 * then reads only the columns of the features it keeps). Before lf_model_load only. The
 * forward's bytes are the same either way. */
LF_EXPORT(lf_model_set_ffn_down_layout) int lf_model_set_ffn_down_layout(lf_model* model, const char* layout);
/* from_host 1: the first node of a model with per-layer embeddings loads without
 * per_layer_token_embd (E2B: 2.35 B values), which is then not placed; each call hands
 * lf_per_layer_inputs_from_rows the rows of its tokens. 0 (default): the table is placed whole.
 * Before lf_model_load only. The inputs' bytes are the same either way. */
LF_EXPORT(lf_model_set_per_layer_rows) int lf_model_set_per_layer_rows(lf_model* model, int from_host);
/* The KV cache types of the sessions lf_session_create makes on this model, by llama.cpp's
 * names: "f16" (default), "q8_0" or "q4_0" for K and for V (docs/attention.md, "Quantized
 * cache"; NULL: "f16"); any other name is refused naming it. Before lf_session_create; sessions
 * made earlier keep theirs. */
LF_EXPORT(lf_model_set_kv_types) int lf_model_set_kv_types(lf_model* model, const char* k_type, const char* v_type);
/* The longest media span (lf_session_set_span) the sessions lf_session_create makes on this model
 * take, 0 to 8192 rows: their sliding layers' rings hold that many positions more than the
 * window (llama.cpp's rings hold a ubatch more), and never fewer than 64 (the default). Before
 * lf_session_create; lf_node_needs_json counts it. Returns 1, or 0 naming a value out of range. */
LF_EXPORT(lf_model_set_max_span) int lf_model_set_max_span(lf_model* model, int max_span);
LF_EXPORT(lf_model_n_embd) int lf_model_n_embd(const lf_model* model);
LF_EXPORT(lf_model_n_vocab) int lf_model_n_vocab(const lf_model* model);
LF_EXPORT(lf_model_n_layer) int lf_model_n_layer(const lf_model* model);
LF_EXPORT(lf_model_free) void lf_model_free(lf_model* model);

/* --- sessions: one KV cache per conversation --- */
LF_EXPORT(lf_session_create) lf_session* lf_session_create(const lf_model* model, int max_ctx);
LF_EXPORT(lf_session_n_past) int lf_session_n_past(const lf_session* session);
LF_EXPORT(lf_session_bytes) double lf_session_bytes(const lf_session* session);
LF_EXPORT(lf_session_free) void lf_session_free(lf_session* session);
/* A digest of every byte of the session's KV cache (its K and V slots of every layer, live or not,
 * and the mirrors of other nodes' source layers): FNV-1a 64-bit over the f16 values in layer
 * order, its top 53 bits, so that the value is exact in a double. For tests that a refused call
 * left the cache as it was; not while a forward on the session runs. */
LF_EXPORT(lf_session_kv_digest) double lf_session_kv_digest(const lf_session* session);
/* Cuts the session back to its first n_past positions (docs/forward-pass.md, "The KV cache"): the
 * next lf_forward continues at n_past as if the rest had never been sent. Beyond what the sliding
 * layers' rings still hold (once a ring has wrapped, at most the session's attn_chunk positions,
 * 64 by default), the session returns to its latest checkpoint at or before n_past instead, and
 * the caller feeds the positions from there to n_past again. Returns the length the session then
 * holds (n_past, or the checkpoint's position), or -1 (failed_precondition, the session unchanged)
 * when neither can be done. */
LF_EXPORT(lf_session_truncate) int lf_session_truncate(lf_session* session, int n_past);
/* Keeps a checkpoint of the session at its length: the sliding rings' rows a continuation from
 * there reads, copied (counted in lf_session_bytes), so that a later cut to any position from
 * there on can return to it. At most max_count are kept; the oldest is dropped beyond. Returns 1,
 * or 0 with the last error. Not while a forward on the session runs. */
LF_EXPORT(lf_session_checkpoint) int lf_session_checkpoint(lf_session* session, int max_count);
/* Where the session's last forward spent its time, as JSON owned by the session until the next
 * call: {"layer_ms": [per layer of the range; empty before any forward], "attention_ms", "ffn_ms",
 * "serial_ms" (outside the workers)}, the phases summed over its layers (docs/threads.md). */
LF_EXPORT(lf_session_timings_json) const char* lf_session_timings_json(const lf_session* session);
/* Each worker of the model's pool in its last finished job, as JSON owned by the model until the
 * next call: [{"job_ms", "barrier_ms"}, ...]; NULL for an unloaded model. Call it between jobs:
 * while one runs, its workers are writing these. */
LF_EXPORT(lf_model_worker_timings_json) const char* lf_model_worker_timings_json(const lf_model* model);
/* Approximate modes of the session's next forward calls (docs/approximate.md), off by default,
 * as a JSON object: {"truncated_attention": true, "truncation_threshold": 0.15, "early_exit": true,
 * "exit_threshold": 0.05, "exit_window": 2, "ffn_top_k": 0.5, "ffn_top_k_layers": {"3": 8192},
 * "ffn_top_k_threshold": 0.1}. Keys left out take their defaults, so "{}" is the exact engine
 * again. Returns 1, or 0 with the last error naming the unknown key or the bad value (the
 * options are then unchanged). Not while a forward on the session runs. */
LF_EXPORT(lf_session_set_approx) int lf_session_set_approx(lf_session* session, const char* json);
/* The early-exit state the session's next forward starts its last row in: what the previous
 * node's lf_session_approx_stats reported, {"exit_layer": 41, "recent_updates": [0.01, 0.02]}.
 * Consumed by that forward (a failed call keeps it); without it the row starts fresh. Returns
 * 1, or 0 with the last error naming the bad value (the state is then unchanged). */
LF_EXPORT(lf_session_set_exit_state) int lf_session_set_exit_state(lf_session* session, const char* json);
/* What the approximate modes did in the session's last forward call, summed over its layers, as
 * a JSON object: {"truncated_attention": {"rows", "truncated_rows", "fallback_rows",
 * "v_keys_total", "v_keys_kept", "v_work_skipped", "max_dropped_mass", "max_error_bound"},
 * "ffn_top_k": {"rows", "fallback_rows", "features_total", "features_kept", "features_skipped",
 * "max_dropped_gate_mass"}, "early_exit": {"exit_layer", "recent_updates", "row_updates",
 * "layers_skipped"}}; early_exit's first two are the state to hand the next node, row_updates the
 * last row's relative update per layer of this node (-1 where it had exited).
 * The string lives in the session until the next call of this function on it. */
LF_EXPORT(lf_session_approx_stats) const char* lf_session_approx_stats(const lf_session* session);

/* --- the forward pass (docs/gemma-architecture.md); each returns 1 on success, 0 on error --- */
/* tokens [n] -> out [n, n_embd] */
LF_EXPORT(lf_embed) int lf_embed(const lf_model* model, const int32_t* tokens, int n, float* out);
/* Models with per-layer embeddings (gemma4 E2B/E4B; lf_model_info_json's n_embd_per_layer > 0),
 * on the first node: tokens [n] and their lf_embed output x0 [n, n_embd] -> out [n_layer, n,
 * n_embd_per_layer], every layer's input, layer-major so layers [a, b) are one contiguous slice
 * (docs/forward-pass.md, "Per-layer inputs and shared KV in a pipeline"). */
LF_EXPORT(lf_per_layer_inputs) int lf_per_layer_inputs(const lf_model* model, const int32_t* tokens, int n,
                                                       const float* x0, float* out);
/* lf_per_layer_inputs on a node that reads per_layer_token_embd by rows: rows [n_rows, row_bytes]
 * are the tensor's rows of the distinct token ids row_ids [n_rows] (row id is the file's bytes
 * [offset + id · row_bytes, + row_bytes), row_bytes = lf_node_needs_json's per_layer_row_bytes),
 * in any order, at least every id of tokens. Refused by name: rows of another size, an id outside
 * the vocabulary or given twice, a token without its row, non-finite values. */
LF_EXPORT(lf_per_layer_inputs_from_rows) int lf_per_layer_inputs_from_rows(const lf_model* model, const int32_t* tokens,
                                                                           int n, const float* x0, const int32_t* row_ids,
                                                                           int n_rows, const uint8_t* rows,
                                                                           double row_bytes, float* out);
/* The next lf_forward's per-layer inputs for the session's layers: [range layers, n, n_embd_per_layer]
 * floats, copied; required before every forward of such a model, consumed by a successful one. */
LF_EXPORT(lf_session_set_per_layer_inputs) int lf_session_set_per_layer_inputs(lf_session* session, const float* in,
                                                                               int n_floats);
/* Whether the next lf_forward's rows are one media span (an image's soft-token rows), which the
 * model's sliding-window layers attend both ways, as llama.cpp decodes an image on Gemma 4
 * (docs/vision.md, "An image in the decoder"); global layers stay causal. Consumed by a
 * successful forward (a failed one keeps it); a span longer than the sessions' chunk
 * (lf_model_set_max_span) is refused by name. */
LF_EXPORT(lf_session_set_span) void lf_session_set_span(lf_session* session, int span);
/* Shared KV across nodes (docs/forward-pass.md, "Shared KV across nodes"): a node holding
 * shared-KV layers without their source layer is given the source's K/V rows with each forward
 * (lf_node_needs_json's kv_rows_in), and the node of the source hands them out (kv_rows_out).
 * The next forward's rows of source layer `layer` for positions [pos0, pos0 + n): n_bytes bytes,
 * per position the n_head_kv K rows then the n_head_kv V rows of head_dim values each, in the
 * cache's types (f16 values, or q8_0 / q4_0 blocks: lf_model_set_kv_types), as
 * lf_session_kv_rows gave them, copied (a second call for the layer replaces them). Required for
 * each such layer before every forward, consumed by a successful one; the forward refuses
 * missing, mis-sized or non-finite rows and rows of other positions than its own, by name.
 * lf_session_clear_kv_rows drops rows set and not consumed. */
LF_EXPORT(lf_session_set_kv_rows) int lf_session_set_kv_rows(lf_session* session, int layer, int pos0, int n,
                                                             const uint8_t* bytes, double n_bytes);
LF_EXPORT(lf_session_clear_kv_rows) void lf_session_clear_kv_rows(lf_session* session);
/* After a successful forward, the call's new rows of source layer `layer` (one of kv_rows_out),
 * laid out as above and owned by the session until its next forward: their byte count, and
 * their first byte; -1 and NULL (with the last error set) for a layer it hands out no rows of. */
LF_EXPORT(lf_session_kv_rows_bytes) double lf_session_kv_rows_bytes(const lf_session* session, int layer);
LF_EXPORT(lf_session_kv_rows) const uint8_t* lf_session_kv_rows(const lf_session* session, int layer);
/* in [n, n_embd] at positions start_pos.. -> out [n or 1 (last_only), n_embd] */
LF_EXPORT(lf_forward) int lf_forward(const lf_model* model, lf_session* session, int start_pos, const float* in,
                                     int n, float* out, int last_only);
/* lf_forward without blocking the caller: hands the work to the model's pool and returns 1 at
 * once (0: refused at once, e.g. invalid input or a forward already running; nothing started).
 * *done_flag (4-byte aligned, in wasm memory) is set to 0, then flips to 1 (success) or 2 (error)
 * with an atomic store and a futex wake, so JS can await Atomics.waitAsync on it. in, out and
 * session must stay untouched until then. After a 2, lf_forward_async_result() returns 0 with
 * that job's error as the last error. In the wasm32-wasi build the flag is set before return. */
LF_EXPORT(lf_forward_async) int lf_forward_async(lf_model* model, lf_session* session, int start_pos, const float* in,
                                                 int n, float* out, int last_only, int32_t* done_flag);
LF_EXPORT(lf_forward_async_result) int lf_forward_async_result(const lf_model* model);
/* Several sessions' rows in one forward (docs/batching.md). Entry i is sessions[i] at positions
 * start_pos[i].. with n[i] rows. in holds every entry's rows in entry order [sum n, n_embd]; out
 * receives every entry's output rows in entry order: n[i] rows, or 1 where last_only[i]. Each
 * entry is validated and finished on its own, exactly as lf_forward would do it alone: an entry
 * refused (stale start_pos, context overflow, non-finite input or output, missing per-layer
 * inputs...) leaves its session as it was while the others run. An entry's output bytes are those
 * lf_forward gives its session alone, whatever else is in the batch, at any thread count, in
 * every build. Per-session settings (approximate modes, exit state, per-layer inputs, shipped K/V
 * rows) are set on each session beforehand, as for lf_forward.
 * Returns 1 when the batch ran (each entry's outcome: lf_forward_batch_result_json), 0 when it is
 * refused as a whole (n_entries < 1, an entry without rows, a session twice, missing buffers, a
 * forward already running). */
LF_EXPORT(lf_forward_batch) int lf_forward_batch(const lf_model* model, int n_entries, lf_session* const* sessions,
                                                 const int32_t* start_pos, const int32_t* n, const int32_t* last_only,
                                                 const float* in, float* out);
/* lf_forward_batch without blocking, as lf_forward_async: returns 1 at once, then *done_flag flips
 * to 1 once the batch ran (the entries' outcomes in lf_forward_batch_result_json). The arrays, in,
 * out and the sessions must stay untouched until then. */
LF_EXPORT(lf_forward_batch_async) int lf_forward_batch_async(lf_model* model, int n_entries, lf_session* const* sessions,
                                                             const int32_t* start_pos, const int32_t* n,
                                                             const int32_t* last_only, const float* in, float* out,
                                                             int32_t* done_flag);
/* The last finished batch's outcomes, JSON owned by the model until the next call: one object per
 * entry, {"code": 0} or {"code": 6, "message": "start_pos 3 does not match the session's n_past 5"}
 * (code: the lf_last_error_code numbering). */
LF_EXPORT(lf_forward_batch_result_json) const char* lf_forward_batch_result_json(const lf_model* model);
/* The memory-read ceiling decode is measured against: every byte of the loaded layers' weights
 * read once on the model's threads (lf::read_probe_async). Started and awaited like
 * lf_forward_async (done_flag: 1 done; refused with 0 while a forward runs). */
LF_EXPORT(lf_model_read_probe_async) int lf_model_read_probe_async(lf_model* model, int32_t* done_flag);
/* The last finished probe, as JSON owned by the model until the next call: {"bytes" read, "ms",
 * "checksum" (lf::weight_checksum over the layer tensors in order)}; NULL before any. */
LF_EXPORT(lf_model_read_probe_json) const char* lf_model_read_probe_json(const lf_model* model);
/* hidden [n_rows, n_embd] -> logits [n_rows, n_vocab], the vocabulary rows shared out over the
 * model's threads (on the caller's alone while a forward holds them). */
LF_EXPORT(lf_head) int lf_head(const lf_model* model, const float* hidden, int n_rows, float* logits);
/* lf_head without blocking, as lf_forward_async: returns 1 at once (0: refused, nothing started),
 * then *done_flag flips to 1 (success) or 2 (error: lf_forward_async_result() gives it). */
LF_EXPORT(lf_head_async) int lf_head_async(lf_model* model, const float* hidden, int n_rows, float* logits,
                                           int32_t* done_flag);

/* --- Gemma 4's MTP drafter (gemma4-assistant; docs/gemma-architecture.md, "The MTP drafter"),
 * loaded beside the node that holds its target's head; each returns 1 / a handle, 0 / NULL on error --- */
/* --- a member of a tensor-parallel group (docs/tensor-parallel.md) ---
 * S members serve layers [begin, end) together, each holding its slices of every layer; the
 * host runs each call phase by phase and hands every member all members' pieces in between. */
typedef struct lf_member lf_member;
typedef struct lf_member_call lf_member_call;
/* What member i of n_members places: {"tensors": [{"name", "n_bytes", "ranges": [[offset, size],
 * ...]}], "weight_bytes"}, each tensor's ranges relative to the file tensor's first byte, to be
 * placed one after another (NULL and the last error on a refused split). Owned by gguf. With
 * ends 1 the member also holds the model's ends the range touches, a slice of the vocabulary of
 * each (the embedding if it begins at layer 0, the head if it ends at the last layer). */
LF_EXPORT(lf_member_tensors_json) const char* lf_member_tensors_json(lf_gguf* gguf, int layer_begin, int layer_end,
                                                                     int member, int n_members, int ends);
/* What member i of n_members holds, as lf_node_needs_json answers for a node: {"tensor_bytes",
 * "kv_bytes_per_session" (K/V of its KV heads at max_ctx, 0: the model's, in k_type and v_type as
 * lf_model_set_kv_types names them, NULL: f16), "scratch_bytes" and "scratch_bytes_per_worker" (a
 * call of max_tokens rows), "relayout_bytes" (while loading: one row strip's, where this build
 * lays Q4_0 out in strips; else 0), "piece_floats" (the largest piece a call is handed), "per_layer_floats" (an E-model call's
 * per-layer inputs), "kv_rows_in" and "kv_rows_out" (shared KV across the group's edge: [{"layer", "bytes_per_token" of
 * its heads, "heads": [begin, end) of the layer's "n_head_kv", "k_row", "v_row" bytes of a head}]), "tensors"}, with ends 1 its slices of the model's ends and their calls'
 * buffers too (NULL and the last error on a refused split). Owned by gguf. */
LF_EXPORT(lf_member_needs_json) const char* lf_member_needs_json(lf_gguf* gguf, int layer_begin, int layer_end,
                                                                 int member, int n_members, int max_ctx, int max_tokens,
                                                                 const char* k_type, const char* v_type, int ends);
LF_EXPORT(lf_member_create) lf_member* lf_member_create(void);
/* Records where tensor `name`'s member bytes (its ranges, end to end) live: writable, the
 * member's alone and outliving it (lf_member_load may rewrite them into the layout its kernels
 * read, as a node's load does). */
LF_EXPORT(lf_member_place_tensor) int lf_member_place_tensor(lf_member* member, const char* name, const uint8_t* data);
LF_EXPORT(lf_member_load) int lf_member_load(lf_member* member, lf_gguf* gguf, int layer_begin, int layer_end,
                                             int index, int n_members, int n_threads, int ends);
/* The vocabulary rows [begin, end) a member loaded with ends holds (0, 0 without ends), and what
 * it computes of them, as lf_embed, lf_per_layer_inputs (a member holds its rows of the table)
 * and lf_head do for a node: embed and per-layer inputs take only tokens of its rows, and the
 * head gives logits [n_rows, end - begin]. */
LF_EXPORT(lf_member_vocab_begin) int lf_member_vocab_begin(const lf_member* member);
LF_EXPORT(lf_member_vocab_end) int lf_member_vocab_end(const lf_member* member);
LF_EXPORT(lf_member_embed) int lf_member_embed(const lf_member* member, const int32_t* tokens, int n, float* out);
LF_EXPORT(lf_member_per_layer_inputs) int lf_member_per_layer_inputs(const lf_member* member, const int32_t* tokens,
                                                                     int n, const float* x0, float* out);
LF_EXPORT(lf_member_head) int lf_member_head(const lf_member* member, const float* hidden, int n_rows, float* logits);
/* The types of the caches of the member's sessions made after it, as lf_model_set_kv_types
 * names them ('f16', 'q8_0', 'q4_0'; NULL: f16); 0 and the last error on another name. */
LF_EXPORT(lf_member_set_kv_types) int lf_member_set_kv_types(lf_member* member, const char* k_type, const char* v_type);
/* A session of the member: its KV heads' cache only; freed with lf_session_free. */
LF_EXPORT(lf_member_session_create) lf_session* lf_member_session_create(const lf_member* member, int max_ctx);
LF_EXPORT(lf_member_free) void lf_member_free(lf_member* member);
/* Starts a call of n rows in [n, n_embd] (the same on every member) at start_pos and runs its
 * first phase; NULL and the last error when refused (the session untouched). */
LF_EXPORT(lf_member_begin) lf_member_call* lf_member_begin(const lf_member* member, lf_session* session, int start_pos,
                                                           const float* in, int n);
/* The current layer and phase (0 attention, 1 attn_output, 2 ffn, 3 ffn_down); -1 once done. */
LF_EXPORT(lf_member_call_layer) int lf_member_call_layer(const lf_member_call* call);
LF_EXPORT(lf_member_call_phase) int lf_member_call_phase(const lf_member_call* call);
/* This member's piece of the current phase (owned by call, valid until the next step), and the
 * float count of member j's. */
LF_EXPORT(lf_member_piece) const float* lf_member_piece(const lf_member_call* call);
LF_EXPORT(lf_member_piece_floats) int lf_member_piece_floats(const lf_member_call* call, int member);
/* Member j's piece of the current phase, n_floats floats (checked: size, finite values). */
LF_EXPORT(lf_member_put_piece) int lf_member_put_piece(lf_member_call* call, int member, const float* piece,
                                                       int n_floats);
/* Every piece in: the next phase. Returns 1, or 0 with the last error: a piece missing leaves the
 * call waiting for it; a failure in the phase ends the call, its session as it was. After the
 * last layer the call is done and its output ready. */
LF_EXPORT(lf_member_step) int lf_member_step(lf_member_call* call);
/* lf_member_begin and lf_member_step with the phase started on the member's threads rather than
 * waited for: *done_flag is set to 0, then to 1 (with a futex wake on it) once the phase's work is
 * over, after which lf_member_phase_end must end the phase (its outcome: 1, or 0 and the last
 * error, the call then over and its session as it was) before anything else is asked of the call.
 * On the single-thread build the flag is 1 when the call returns. */
LF_EXPORT(lf_member_begin_async) lf_member_call* lf_member_begin_async(const lf_member* member, lf_session* session,
                                                                       int start_pos, const float* in, int n,
                                                                       int32_t* done_flag);
LF_EXPORT(lf_member_step_async) int lf_member_step_async(lf_member_call* call, int32_t* done_flag);
LF_EXPORT(lf_member_phase_end) int lf_member_phase_end(lf_member_call* call);
/* The output [n, n_embd] once done (lf_member_call_layer -1), else NULL. */
LF_EXPORT(lf_member_output) const float* lf_member_output(const lf_member_call* call);
/* Frees the call; one not done is abandoned and its session left as it was. */
LF_EXPORT(lf_member_call_free) void lf_member_call_free(lf_member_call* call);

typedef struct lf_drafter lf_drafter;
LF_EXPORT(lf_drafter_create) lf_drafter* lf_drafter_create(void);
/* As lf_model_place_tensor, for the drafter's file: the bytes are writable, the drafter's alone and
 * outlive it (lf_drafter_load may rewrite them into the layout its kernels read). */
LF_EXPORT(lf_drafter_place_tensor) int lf_drafter_place_tensor(lf_drafter* drafter, const char* name, const uint8_t* data);
/* Workers of the drafter's own pool; before lf_drafter_load. */
LF_EXPORT(lf_drafter_set_threads) int lf_drafter_set_threads(lf_drafter* drafter, int n_threads);
/* Reads the drafter's header (gguf) beside a loaded target node, which must hold the target's head
 * and the caches the drafter reads, and must outlive the drafter. Refused by name: a missing or
 * mis-shaped tensor, or a drafter for another target (width, vocabulary, window, layer shapes). */
LF_EXPORT(lf_drafter_load) int lf_drafter_load(lf_drafter* drafter, lf_gguf* gguf, const lf_model* target);
/* One draft step at the target session's n_past: token (the last one, not yet in the target's
 * cache) and h [target n_embd] (the target's output-normed hidden state of the row before it, or
 * the previous step's h_next) -> logits [n_vocab], h_next [target n_embd]. Every step of a draft
 * runs at the same position and only reads the target's cache. Refused (0) for a bad token, a
 * non-finite h, a session without the layers read or without a position, and when the drafter's
 * states turn non-finite (drafting should stop there). Not while the target session runs a forward. */
LF_EXPORT(lf_drafter_step) int lf_drafter_step(const lf_drafter* drafter, const lf_session* target_session, int32_t token,
                                               const float* h, float* logits, float* h_next);
/* n_draft greedy steps at position pos of the target session, as llama.cpp's draft-mtp picks: token
 * (the one at pos) and hidden [target n_embd] (the target's hidden state at pos - 1 before its
 * output norm: the tail node's forward output for that row) -> ids [n_draft], each the argmax of a
 * step's logits, fed to the next. pos lies in [1, n_past] and no deeper than a cut of the session
 * could go; keys at pos and after are not read, so a step whose last drafted rows were rejected
 * drafts from its last kept row before the session is cut back. Refused (0) as lf_drafter_step. */
LF_EXPORT(lf_drafter_draft) int lf_drafter_draft(const lf_drafter* drafter, const lf_session* target_session, int pos,
                                                 int32_t token, const float* hidden, int n_draft, int32_t* ids);
LF_EXPORT(lf_drafter_free) void lf_drafter_free(lf_drafter* drafter);

/* --- vision: Gemma 4's vision tower (a projector GGUF, "mmproj"), images into soft tokens --- */
typedef struct lf_vision lf_vision;
/* The projector of header gguf, its tensor data [size bytes] (the file from its data offset on,
 * which must outlive the encoder) on n_threads workers of its own; NULL on error: a key, tensor or
 * option the tower does not support, named. Independent of gguf afterwards. */
LF_EXPORT(lf_vision_create) lf_vision* lf_vision_create(lf_gguf* gguf, const uint8_t* data, double size, int n_threads);
/* The language model's width, that of each soft token. */
LF_EXPORT(lf_vision_n_embd_text) int lf_vision_n_embd_text(const lf_vision* vision);
/* Soft tokens a width x height image gives within a budget of max_tokens (0: the projector's own,
 * 1120; else 70 to 1120), and the size it is resized to (out_width, out_height may be NULL); -1 on
 * error (a side of 0 or over 46000 pixels, a budget out of range). */
LF_EXPORT(lf_vision_tokens) int lf_vision_tokens(const lf_vision* vision, int width, int height, int max_tokens,
                                                 int* out_width, int* out_height);
/* Starts encoding rgb [height, width, 3] (8 bits a channel, copied: it may go once this returns)
 * on the encoder's workers, preprocessed and encoded as llama.cpp's mtmd does; *done_flag flips to
 * 1 when it is over (before this returns in the single-thread builds). Returns n, the soft tokens
 * as lf_vision_tokens gives them; -1 naming what is refused (nothing started): an image or budget
 * out of range, an encode under way or not yet taken. */
LF_EXPORT(lf_vision_encode_async) int lf_vision_encode_async(lf_vision* vision, const uint8_t* rgb, int width, int height,
                                                             int max_tokens, int32_t* done_flag);
/* Once the flag flipped: embd [n, n_embd_text], the rows the language model reads, whose bytes do
 * not depend on the thread count; returns n, or -1 with the encode's failure. */
LF_EXPORT(lf_vision_encode_result) int lf_vision_encode_result(lf_vision* vision, float* embd);
LF_EXPORT(lf_vision_free) void lf_vision_free(lf_vision* vision);

/* --- audio: Gemma 4's audio encoder (E2B/E4B, in the same projector file), clips into soft tokens --- */
typedef struct lf_audio lf_audio;
/* The audio encoder of projector header gguf, its tensor data [size bytes] (the file from its
 * data offset on, which must outlive the encoder) on n_threads workers of its own; NULL on error:
 * no audio encoder, or a key, tensor or option it does not support, named. */
LF_EXPORT(lf_audio_create) lf_audio* lf_audio_create(lf_gguf* gguf, const uint8_t* data, double size, int n_threads);
/* The language model's width, that of each soft token. */
LF_EXPORT(lf_audio_n_embd_text) int lf_audio_n_embd_text(const lf_audio* audio);
/* The chunks (30 s each, the last shorter) a clip of n_samples 16 kHz samples is encoded in, each
 * its own run of soft tokens: returns their count and writes each's tokens to chunk_tokens (up to
 * max_chunks; NULL to count only); -1 on error (no samples, a last piece too short for a frame). */
LF_EXPORT(lf_audio_tokens) int lf_audio_tokens(const lf_audio* audio, double n_samples, int32_t* chunk_tokens, int max_chunks);
/* Starts encoding samples [n_samples] (16 kHz mono, copied: they may go once this returns) on the
 * encoder's workers, as llama.cpp's mtmd computes its features and encodes them; *done_flag flips
 * to 1 when it is over (before this returns in the single-thread builds). 0, or -1 naming what is
 * refused (nothing started): a clip lf_audio_tokens refuses, a sample that is not finite, an
 * encode under way or not yet taken. */
LF_EXPORT(lf_audio_encode_async) int lf_audio_encode_async(lf_audio* audio, const float* samples, double n_samples,
                                                           int32_t* done_flag);
/* Once the flag flipped: embd [n, n_embd_text], the chunks' rows in order, whose bytes do not
 * depend on the thread count, and each chunk's tokens (up to max_chunks; may be NULL); returns n,
 * or -1 with the encode's failure. */
LF_EXPORT(lf_audio_encode_result) int lf_audio_encode_result(lf_audio* audio, float* embd, int32_t* chunk_tokens, int max_chunks);
LF_EXPORT(lf_audio_free) void lf_audio_free(lf_audio* audio);

/* --- tokenizer: the GGUF's vocabulary, tokenizing exactly as llama.cpp does --- */
typedef struct lf_tokenizer lf_tokenizer;
/* Reads tokenizer.ggml.* from a parsed header; NULL on error. Independent of gguf afterwards. */
LF_EXPORT(lf_tokenizer_create) lf_tokenizer* lf_tokenizer_create(lf_gguf* gguf);
/* utf8 [n_bytes] -> out [max_out] token ids. add_bos: add the special tokens the vocabulary asks
 * for (BOS for Gemma), like llama.cpp's add_special; parse_special: control-token texts in the
 * input ("<start_of_turn>") become those tokens. Returns the full token count, -1 on error.
 * Like snprintf: only min(count, max_out) ids are written; count > max_out means "call again
 * with max_out >= count" (max_out 0 with out NULL just measures). */
LF_EXPORT(lf_tokenize) int lf_tokenize(lf_tokenizer* tok, const char* utf8, int n_bytes, int add_bos, int parse_special,
                                       int32_t* out, int max_out);
/* lf_tokenize for a rendered chat (parse_special on) whose untrusted text, the messages, lies in
 * byte spans [spans[2i], spans[2i + 1]) for i < n_spans, sorted and disjoint: control, unknown and
 * marker tokens (Gemma 4's <|name>, <name|>, <|name|>) are matched only where the match shares
 * no byte with a span; other user-defined tokens everywhere, as llama.cpp does. Out-of-range,
 * unsorted or overlapping spans are an error (-1); an empty span guards nothing. */
LF_EXPORT(lf_tokenize_untrusted) int lf_tokenize_untrusted(lf_tokenizer* tok, const char* utf8, int n_bytes, int add_bos,
                                                           const uint32_t* spans, int n_spans, int32_t* out, int max_out);
/* ids [n] -> out [max_out] UTF-8 bytes, not NUL-terminated. render_special writes control tokens
 * ("<bos>") as text. Returns the full byte count, -1 on error; snprintf-like as lf_tokenize. */
LF_EXPORT(lf_detokenize) int lf_detokenize(lf_tokenizer* tok, const int32_t* ids, int n, int render_special, char* out,
                                           int max_out);
LF_EXPORT(lf_tokenizer_n_vocab) int lf_tokenizer_n_vocab(const lf_tokenizer* tok);
/* The most input bytes one token can stand for (its longest text), so a text longer than
 * n x this cannot be n tokens or fewer; 0 when there is no such bound; -1 when tok is NULL. */
LF_EXPORT(lf_tokenizer_max_token_bytes) int lf_tokenizer_max_token_bytes(const lf_tokenizer* tok);
/* BOS / EOS ids, -1 when the vocabulary has none (or tok is NULL). */
LF_EXPORT(lf_tokenizer_bos) int lf_tokenizer_bos(const lf_tokenizer* tok);
LF_EXPORT(lf_tokenizer_eos) int lf_tokenizer_eos(const lf_tokenizer* tok);
/* The vocabulary text of a token, NUL-terminated ("▁Hello", "<0x0A>", "<bos>"), owned by tok;
 * NULL for an id outside the vocabulary. */
LF_EXPORT(lf_tokenizer_piece) const char* lf_tokenizer_piece(const lf_tokenizer* tok, int id);
LF_EXPORT(lf_tokenizer_free) void lf_tokenizer_free(lf_tokenizer* tok);

#ifdef __cplusplus
}
#endif

#endif
