/* The C ABI of layerfold: the only surface the JS host (and any other host) calls.
 * Every function that can fail returns 0 / NULL on failure; lf_last_error_code() and
 * lf_last_error_message() then say why (per thread). Pointers into wasm memory returned here
 * stay valid until the owning handle is freed. The exported names are also listed, as data,
 * in wasm/exports.txt. */
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
LF_EXPORT(lf_alloc) void* lf_alloc(size_t n_bytes);
LF_EXPORT(lf_free) void lf_free(void* ptr);
LF_EXPORT(lf_version) const char* lf_version(void);

/* --- GGUF header: parse a prefix of a file of file_size bytes --- */
/* Returns NULL on error; with code need_more_data, lf_gguf_needed_bytes() says how many. */
LF_EXPORT(lf_gguf_parse) lf_gguf* lf_gguf_parse(const uint8_t* data, double size, double file_size);
LF_EXPORT(lf_gguf_needed_bytes) double lf_gguf_needed_bytes(void);
/* Metadata and tensor table as JSON (UTF-8, NUL-terminated), owned by the handle. */
LF_EXPORT(lf_gguf_json) const char* lf_gguf_json(lf_gguf* gguf, int include_large_arrays);
LF_EXPORT(lf_gguf_free) void lf_gguf_free(lf_gguf* gguf);

/* --- a node's model: the host places tensor bytes in memory, then loads a layer range --- */
/* Names of the tensors a node of layers [begin, end) needs, as a JSON array, owned by gguf. */
LF_EXPORT(lf_node_tensors_json) const char* lf_node_tensors_json(lf_gguf* gguf, int layer_begin, int layer_end,
                                                                 int with_embedding, int with_head);
LF_EXPORT(lf_model_create) lf_model* lf_model_create(void);
/* Records where tensor `name` (NUL-terminated) lives; the bytes must outlive the model. */
LF_EXPORT(lf_model_place_tensor) int lf_model_place_tensor(lf_model* model, const char* name, const uint8_t* data);
LF_EXPORT(lf_model_load) int lf_model_load(lf_model* model, lf_gguf* gguf, int layer_begin, int layer_end,
                                           int with_embedding, int with_head);
LF_EXPORT(lf_model_n_embd) int lf_model_n_embd(const lf_model* model);
LF_EXPORT(lf_model_n_vocab) int lf_model_n_vocab(const lf_model* model);
LF_EXPORT(lf_model_n_layer) int lf_model_n_layer(const lf_model* model);
LF_EXPORT(lf_model_free) void lf_model_free(lf_model* model);

/* --- sessions: one KV cache per conversation --- */
LF_EXPORT(lf_session_create) lf_session* lf_session_create(const lf_model* model, int max_ctx);
LF_EXPORT(lf_session_n_past) int lf_session_n_past(const lf_session* session);
LF_EXPORT(lf_session_bytes) double lf_session_bytes(const lf_session* session);
LF_EXPORT(lf_session_free) void lf_session_free(lf_session* session);

/* --- the forward pass (spec §3); each returns 1 on success, 0 on error --- */
/* tokens [n] -> out [n, n_embd] */
LF_EXPORT(lf_embed) int lf_embed(const lf_model* model, const int32_t* tokens, int n, float* out);
/* in [n, n_embd] at positions start_pos.. -> out [n or 1 (last_only), n_embd] */
LF_EXPORT(lf_forward) int lf_forward(const lf_model* model, lf_session* session, int start_pos, const float* in,
                                     int n, float* out, int last_only);
/* hidden [n_rows, n_embd] -> logits [n_rows, n_vocab] */
LF_EXPORT(lf_head) int lf_head(const lf_model* model, const float* hidden, int n_rows, float* logits);

#ifdef __cplusplus
}
#endif

#endif
