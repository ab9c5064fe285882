// llama.cpp's own reading of Gemma 4 output (llama_gemma4_parse.cpp beside this file), built at
// test time against the oracle's prebuilt libllama-common with the headers of the llama.cpp
// source node-llama-cpp bundles, as scripts/compare-intermediates builds its programs: the
// source cloned once into $LLAMA_SRC (default /tmp/llama-src), the program into the system's
// temporary directory (never build/), rebuilt when its source changes.
import {execFileSync} from "node:child_process";
import {createHash} from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

import {root} from "./models.mjs";

const bundle = path.join(root, "js-glue", "node_modules", "node-llama-cpp", "llama", "gitRelease.bundle");
const bins = path.join(root, "js-glue", "node_modules", "@node-llama-cpp", "linux-x64", "bins", "linux-x64");
const source = path.join(path.dirname(new URL(import.meta.url).pathname), "llama_gemma4_parse.cpp");

function llamaSource() {
  const dir = process.env.LLAMA_SRC ?? "/tmp/llama-src";
  if (!fs.existsSync(path.join(dir, "include", "llama.h"))) {
    execFileSync("git", ["-c", "advice.detachedHead=false", "clone", "-q", bundle, dir]);
  }
  return dir;
}

function build(src) {
  const hash = createHash("sha256").update(fs.readFileSync(source)).update(bins).update(src).digest("hex").slice(0, 16);
  const out = path.join(os.tmpdir(), `layerfold-llama-gemma4-parse-${hash}`);
  if (fs.existsSync(out)) return out;
  execFileSync("g++", ["-O1", "-std=c++17", source, `-I${src}/common`, `-I${src}/include`, `-I${src}/ggml/include`,
    `-L${bins}`, "-l:libllama-common.so", "-l:libllama.v0.4.0.so", "-l:libggml.v0.4.0.so", "-l:libggml-base.so",
    `-Wl,-rpath,${bins}`, "-o", `${out}.part`], {stdio: ["ignore", "inherit", "inherit"]});
  fs.renameSync(`${out}.part`, out);
  return out;
}

/**
 * A reader of Gemma 4 outputs by llama.cpp: read({tools, parallel, thinking, prefixes, outputs})
 * answers, per output, {whole: MSG, prefixes?: [MSG for each prefix of 0..n UTF-8 bytes]}, MSG
 * {content, reasoning_content, tool_calls: [{name, arguments}]} or {error}.
 * @example const read = llamaGemma4Reader(); read({tools: [], parallel: true, thinking: true, prefixes: false, outputs: ["Hi"]})
 */
export function llamaGemma4Reader() {
  const src = llamaSource();
  const program = build(src);
  const template = path.join(src, "models", "templates", "google-gemma-4-31B-it.jinja");
  return (request) => JSON.parse(execFileSync(program, [template], {input: JSON.stringify(request), maxBuffer: 1 << 30, encoding: "utf8"}));
}
