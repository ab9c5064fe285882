// llama.cpp's own rendering of chat requests (its common chat layer, as its server calls it):
// llama_chat/llama_chat.cpp built against the headers of the llama.cpp source the oracle bundles
// and linked to the oracle's prebuilt libllama-common, once per source, in the system's temporary
// directory; then run over a list of requests.
import {execFileSync} from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

import {llamaSourceTree} from "./llama_source.mjs";
import {root} from "./models.mjs";

const source = path.join(root, "tests", "js", "support", "llama_chat", "llama_chat.cpp");
const bins = path.join(root, "js-glue", "node_modules", "@node-llama-cpp", "linux-x64", "bins", "linux-x64");

function binary() {
  const hash = crypto.createHash("sha256").update(fs.readFileSync(source)).update(bins).digest("hex").slice(0, 16);
  const out = path.join(os.tmpdir(), `layerfold-llama-chat-${hash}`);
  if (fs.existsSync(out)) return out;
  const src = llamaSourceTree(["common", "include", "ggml/include", "vendor"]);
  execFileSync("g++", ["-O1", "-std=c++17", source,
    `-I${src}/common`, `-I${src}/include`, `-I${src}/ggml/include`, `-I${src}/vendor`,
    `-L${bins}`, "-l:libllama-common.so", "-l:libllama.v0.4.0.so", "-l:libggml.v0.4.0.so", "-l:libggml-base.so",
    `-Wl,-rpath,${bins}`, "-o", `${out}.part`], {stdio: ["ignore", "ignore", "inherit"]});
  fs.renameSync(`${out}.part`, out);
  return out;
}

/**
 * Each request {messages, tools?, tool_choice?, enable_thinking?} rendered by llama.cpp with the
 * vocabulary of `vocabFile` and the template of `templateFile` (default: the vocabulary's own):
 * [{prompt, tokens} | {error}], in order.
 * @example const [{prompt, tokens}] = llamaChat(vocab, template, [{messages: [{role: "user", content: "Hi"}]}]);
 */
export function llamaChat(vocabFile, templateFile, requests) {
  const args = templateFile ? [vocabFile, templateFile] : [vocabFile];
  const input = requests.map((r) => JSON.stringify(r)).join("\n") + "\n";
  const out = execFileSync(binary(), args, {input, maxBuffer: 1 << 28, stdio: ["pipe", "pipe", "ignore"]});
  return out.toString("utf8").trim().split("\n").map((line) => JSON.parse(line));
}
