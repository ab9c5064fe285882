// The tests' oracle is the host's llama.cpp reference (node-llama-cpp 3.21.1).
export * from "../../../js-glue/src/cli/llama_reference.js";
