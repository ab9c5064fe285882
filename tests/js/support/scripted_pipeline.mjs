// A stand-in for a Pipeline that writes a given text, for gateway tests of what the gateway
// makes of a model's output (tool calls, thoughts) that random weights would never write: the
// real Gemma 4 vocabulary and chat template (models/ggml-vocab-gemma-4.gguf of the oracle's
// llama.cpp source) with a step that answers, for each session, logits whose largest entry is
// the next token of the script, then the end of the turn. A session's first step after it is
// made, cut or checkpointed holds the rest of a prompt; the script starts after it.
import fs from "node:fs";

import {reparseModelHeader} from "../../../js-glue/src/gguf/header.js";
import {Tokenizer} from "../../../js-glue/src/tokens/tokenizer.js";
import {loadSingleThreadModule} from "../../../js-glue/src/wasm/load_node.js";
import {llamaSourceFile} from "./llama_source.mjs";
import {recordPrompts} from "./prompt_recorder.mjs";

/**
 * {tokenizer, header, step, truncate, checkpoint, dropSession, script(text), scriptIds(ids)}: script(text) sets
 * what every new session writes (text tokenized with its markers as tokens, then <turn|>);
 * scriptIds(ids) the same for tokens given one by one, to choose where the text is cut; prompts
 * holds each prompt as the gateway rendered it (prompt_recorder.mjs).
 * @example const pipeline = await scriptedGemma4Pipeline(); pipeline.script("<|channel>thought\nhm<channel|>Hi");
 */
export async function scriptedGemma4Pipeline() {
  const lf = await loadSingleThreadModule();
  const bytes = fs.readFileSync(llamaSourceFile("models/ggml-vocab-gemma-4.gguf"));
  const gguf = reparseModelHeader(lf, {bytes, file_size: bytes.length});
  let tokenizer;
  let metadata;
  try {
    tokenizer = Tokenizer.fromGguf(lf, gguf);
    ({metadata} = lf.json(lf.fn.lf_gguf_json(gguf, 0)));
  } finally {
    lf.fn.lf_gguf_free(gguf);
  }
  const [endOfTurn] = tokenizer.encode("<turn|>", {addBos: false, parseSpecial: true});
  let ids = [];
  const sessions = new Map();  // session -> {positions, promptEnd}: what it holds, where its prompt ended
  const pipeline = {
    tokenizer,
    header: {metadata, info: {n_ctx_train: 4096}},
    script(text) {
      this.scriptIds(tokenizer.encode(text, {addBos: false, parseSpecial: true}));
    },
    scriptIds(given) {
      ids = [...given, endOfTurn];
    },
    async step(session, tokens) {
      const s = sessions.get(session) ?? {positions: 0, promptEnd: null};
      s.positions += tokens.length;
      s.promptEnd ??= s.positions;
      sessions.set(session, s);
      const logits = new Float32Array(tokenizer.nVocab);
      logits[ids[Math.min(s.positions - s.promptEnd, ids.length - 1)]] = 1;
      return {logits};
    },
    async truncate(session, n) {
      sessions.set(session, {positions: n, promptEnd: null});
      return {rebuilt: []};
    },
    async checkpoint(session) {
      sessions.get(session).promptEnd = null;
      return [0];
    },
    async dropSession(session) {
      sessions.delete(session);
    },
  };
  pipeline.prompts = recordPrompts(pipeline);
  return pipeline;
}
