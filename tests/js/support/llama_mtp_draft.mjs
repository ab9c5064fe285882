// llama.cpp's MTP drafting (llama_programs/llama_mtp_draft.cpp, built against the oracle's
// libllama): a target's prompt, then draft steps of its gemma4-assistant drafter.
import {execFileSync} from "node:child_process";
import path from "node:path";

import {llamaBins, llamaProgram} from "./llama_source.mjs";

const source = path.join(path.dirname(new URL(import.meta.url).pathname), "llama_programs", "llama_mtp_draft.cpp");

/**
 * The target's output-normed hidden state after `prompt` and, for each of `draftTokens` (the
 * token after the prompt, then drafted tokens fed back), the drafter's logits and next state:
 * {h, steps: [{logits, h_next}]}.
 * @example const {h, steps} = llamaMtpDraft(target, drafter, [2, 10, 47], [5, 17]);
 */
export function llamaMtpDraft(targetFile, drafterFile, prompt, draftTokens, threads = 2) {
  const args = [targetFile, drafterFile, prompt.join(","), draftTokens.join(","), llamaBins, String(threads)];
  const out = execFileSync(llamaProgram(source), args, {maxBuffer: 1 << 28, stdio: ["ignore", "pipe", "ignore"]});
  return JSON.parse(out.toString("utf8"));
}
