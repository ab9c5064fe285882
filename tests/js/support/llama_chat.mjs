// llama.cpp's own rendering of chat requests (its common chat layer, as its server calls it):
// llama_programs/llama_chat.cpp, built against the oracle's libllama-common (llama_source.mjs), run
// over a list of requests.
import path from "node:path";

import {llamaProgram} from "./llama_source.mjs";
import {runChecked} from "./run_async.mjs";

const source = path.join(path.dirname(new URL(import.meta.url).pathname), "llama_programs", "llama_chat.cpp");

/**
 * Each request {messages, tools?, tool_choice?, enable_thinking?} rendered by llama.cpp with the
 * vocabulary of `vocabFile` and the template of `templateFile` (default: the vocabulary's own):
 * [{prompt, tokens} | {error}], in order.
 * @example const [{prompt, tokens}] = await llamaChat(vocab, template, [{messages: [{role: "user", content: "Hi"}]}]);
 */
export async function llamaChat(vocabFile, templateFile, requests) {
  const args = templateFile ? [vocabFile, templateFile] : [vocabFile];
  const input = requests.map((r) => JSON.stringify(r)).join("\n") + "\n";
  const out = await runChecked(await llamaProgram(source), args, {input});
  return out.trim().split("\n").map((line) => JSON.parse(line));
}
