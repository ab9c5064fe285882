#!/usr/bin/env bash
# Builds the two libFuzzer targets with clang-14 (libFuzzer + ASan + UBSan) and runs each:
#   fuzz_gguf          the GGUF reader, on any bytes, whole or as a prefix
#   fuzz_model_config  what a header makes the engine size: configuration and node plan
# Each first replays its corpus kept in the repository (tests/fuzz/corpus/<target>/, plus the
# GGUF reader's generated seeds), then fuzzes for FUZZ_SECONDS (default 45) from it.
# FUZZ_MERGE=1 afterwards merges what the run found into the repository's corpus, minimized
# (how the long runs of docs/fuzzing.md grew it). Exits non-zero when libFuzzer reports a crash,
# leak, timeout or out-of-memory.
set -euo pipefail

cd "$(dirname "$0")/../.."
out=build/fuzz
mkdir -p "$out/seeds" "$out/artifacts"

cxx=(clang++-14 -std=c++20 -g -O1 -DJSON_NOEXCEPTION=1 -I include -I src)
fuzz=(-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all)
core=(src/gguf/ggml_type.cpp src/base/status.cpp)
# The model target reaches the configuration, the shard plan, the KV cache and scratch sizes.
engine=($(ls src/{base,gguf,quant,kernels,layout,ops,model,approx}/*.cpp))

# The model target's compile (the engine's sources, one after another) is the long one: the GGUF
# reader's target is built and run beside it.
"${cxx[@]}" "${fuzz[@]}" "${engine[@]}" tests/fuzz/fuzz_model_config.cpp -o "$out/fuzz_model_config" &
model_build=$!
"${cxx[@]}" "${fuzz[@]}" "${core[@]}" src/gguf/gguf_reader.cpp src/gguf/gguf_json.cpp tests/fuzz/fuzz_gguf.cpp \
  -o "$out/fuzz_gguf"
"${cxx[@]}" -fsanitize=address,undefined \
  "${core[@]}" src/gguf/gguf_writer.cpp tests/fuzz/make_seed_corpus.cpp -o "$out/make_seed_corpus"
"$out/make_seed_corpus" "$out/seeds"

run() {  # target, extra corpus dirs...
  local target=$1; shift
  local kept=tests/fuzz/corpus/$target work=$out/$target-corpus
  mkdir -p "$work" "$kept"
  "$out/$target" "$work" "$kept" "$@" \
    -max_total_time="${FUZZ_SECONDS:-45}" -rss_limit_mb=2048 -max_len=262144 -timeout=10 \
    -artifact_prefix="$out/artifacts/$target-" -print_final_stats=1
  if [ "${FUZZ_MERGE:-0}" = 1 ]; then
    "$out/$target" -merge=1 -max_len=262144 -rss_limit_mb=2048 "$kept" "$work"
  fi
}

run fuzz_gguf "$out/seeds"
wait "$model_build"
run fuzz_model_config
