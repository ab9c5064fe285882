// llama.cpp's MTP drafting (llama_programs/llama_mtp_draft.cpp, built against the oracle's
// libllama): a target's prompt, then draft steps of its gemma4-assistant drafter.
import path from "node:path";

import {llamaBins, llamaProgram} from "./llama_source.mjs";
import {runChecked} from "./run_async.mjs";

const source = path.join(path.dirname(new URL(import.meta.url).pathname), "llama_programs", "llama_mtp_draft.cpp");

/**
 * The target's output-normed hidden state after `prompt` and, for each of `draftTokens` (the
 * token after the prompt, then drafted tokens fed back), the drafter's logits and next state:
 * {h, steps: [{logits, h_next}]}.
 * @example const {h, steps} = await llamaMtpDraft(target, drafter, [2, 10, 47], [5, 17]);
 */
export async function llamaMtpDraft(targetFile, drafterFile, prompt, draftTokens, threads = 2) {
  const args = [targetFile, drafterFile, prompt.join(","), draftTokens.join(","), llamaBins, String(threads)];
  const out = await runChecked(await llamaProgram(source), args);
  return JSON.parse(out);
}
