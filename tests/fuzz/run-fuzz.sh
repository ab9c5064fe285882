#!/usr/bin/env bash
# Builds the GGUF reader fuzz target with clang-14 (libFuzzer + ASan + UBSan), seeds it with
# small valid files from GgufWriter, and fuzzes for FUZZ_SECONDS (default 60).
# Exits non-zero when libFuzzer reports a crash, leak, timeout or out-of-memory.
set -euo pipefail

cd "$(dirname "$0")/../.."
out=build/fuzz
mkdir -p "$out/corpus" "$out/seeds" "$out/artifacts"

cxx=(clang++-14 -std=c++20 -g -O1 -DJSON_NOEXCEPTION=1 -I include -I src)
core=(src/gguf/ggml_type.cpp src/base/status.cpp)

"${cxx[@]}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  "${core[@]}" src/gguf/gguf_reader.cpp src/gguf/gguf_json.cpp tests/fuzz/fuzz_gguf.cpp -o "$out/fuzz_gguf"
"${cxx[@]}" -fsanitize=address,undefined \
  "${core[@]}" src/gguf/gguf_writer.cpp tests/fuzz/make_seed_corpus.cpp -o "$out/make_seed_corpus"

"$out/make_seed_corpus" "$out/seeds"

# The working corpus grows between runs; the seeds are regenerated every time.
"$out/fuzz_gguf" "$out/corpus" "$out/seeds" \
  -max_total_time="${FUZZ_SECONDS:-60}" -rss_limit_mb=2048 -max_len=65536 -timeout=10 \
  -artifact_prefix="$out/artifacts/" -print_final_stats=1
