// llama.cpp's own reading of Gemma 4 output (llama_programs/llama_gemma4_parse.cpp), built
// against the oracle's libllama-common (llama_source.mjs), on Google's 31B template.
import path from "node:path";

import {llamaProgram, llamaSourceFile} from "./llama_source.mjs";
import {runChecked} from "./run_async.mjs";

const source = path.join(path.dirname(new URL(import.meta.url).pathname), "llama_programs", "llama_gemma4_parse.cpp");

/**
 * A reader of Gemma 4 outputs by llama.cpp: read({tools, parallel, thinking, prefixes, outputs})
 * resolves to, per output, {whole: MSG, prefixes?: [MSG for each prefix of 0..n UTF-8 bytes]}, MSG
 * {content, reasoning_content, tool_calls: [{name, arguments}]} or {error}.
 * @example const read = await llamaGemma4Reader(); await read({tools: [], parallel: true, thinking: true, prefixes: false, outputs: ["Hi"]})
 */
export async function llamaGemma4Reader() {
  const program = await llamaProgram(source);
  const template = llamaSourceFile("models/templates/google-gemma-4-31B-it.jinja");
  return async (request) => JSON.parse(await runChecked(program, [template], {input: JSON.stringify(request)}));
}
