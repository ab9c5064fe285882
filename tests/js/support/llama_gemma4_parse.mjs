// llama.cpp's own reading of Gemma 4 output (llama_programs/llama_gemma4_parse.cpp), built
// against the oracle's libllama-common (llama_source.mjs), on Google's 31B template.
import {execFileSync} from "node:child_process";
import path from "node:path";

import {llamaProgram, llamaSourceFile} from "./llama_source.mjs";

const source = path.join(path.dirname(new URL(import.meta.url).pathname), "llama_programs", "llama_gemma4_parse.cpp");

/**
 * A reader of Gemma 4 outputs by llama.cpp: read({tools, parallel, thinking, prefixes, outputs})
 * answers, per output, {whole: MSG, prefixes?: [MSG for each prefix of 0..n UTF-8 bytes]}, MSG
 * {content, reasoning_content, tool_calls: [{name, arguments}]} or {error}.
 * @example const read = llamaGemma4Reader(); read({tools: [], parallel: true, thinking: true, prefixes: false, outputs: ["Hi"]})
 */
export function llamaGemma4Reader() {
  const program = llamaProgram(source);
  const template = llamaSourceFile("models/templates/google-gemma-4-31B-it.jinja");
  return (request) => JSON.parse(execFileSync(program, [template], {input: JSON.stringify(request), maxBuffer: 1 << 30, encoding: "utf8"}));
}
