// A gateway on loopback for the gateway tests: serveGateway over the tiny model's two layers as
// two in-process nodes (or the nodes given), the official openai client pointed at it, and a
// reference decoder that runs the Pipeline directly (no gateway code) for expected outputs.
import {createRequire} from "node:module";
import path from "node:path";

import {serveGateway} from "../../../js-glue/src/gateway/host.js";
import {llamaSourceFile} from "./llama_source.mjs";
import {model, root} from "./models.mjs";

// The client as applications use it: the openai package, a devDependency of js-glue.
const {default: OpenAI} = createRequire(path.join(root, "js-glue", "package.json"))("openai");

export const tiny = () => model("tiny", "tiny", ["--type", "Q4_0"]);
// The tiny model with the real Gemma vocabulary: its replies tokenize back as they were
// generated far more often than the synthetic vocabulary's, whose "\n" merges with a reply's start.
export const gemmaVocab = () => model("gemma-vocab", "gemma-vocab");
// The real Gemma 4 vocabulary and Google's Gemma 4 chat template, both read from the llama.cpp
// source the oracle bundles (not copied into this repository), on random weights.
export const GEMMA4_VOCAB = () => llamaSourceFile("models/ggml-vocab-gemma-4.gguf");
export const GEMMA4_TEMPLATE = () => llamaSourceFile("models/templates/google-gemma-4-31B-it.jinja");
export const gemma4 = () => model("gemma4-template", "gemma4-vocab", ["--vocab-gguf", GEMMA4_VOCAB(), "--chat-template", GEMMA4_TEMPLATE()]);
export const argmax = (logits) => logits.reduce((best, x, i) => (x > logits[best] ? i : best), 0);

/**
 * A running gateway: {gateway, client, url, pipeline, close()}. `t.after` closes it.
 * @example const {client} = await startGateway(t, {maxQueue: 0});
 */
export async function startGateway(t, {authToken, nodes = "local:0-0,local:1-1", file = tiny(), log = () => {}, ...options} = {}) {
  const gateway = await serveGateway({model: file, nodes, modelId: "tiny", build: "single", port: 0, host: "127.0.0.1", authToken, log, ...options});
  await gateway.opened;
  const client = new OpenAI({baseURL: `${gateway.url}/v1`, apiKey: authToken ?? "unused", maxRetries: 0});
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await gateway.shutdown();
  };
  t.after(close);
  return {gateway, client, url: gateway.url, pipeline: gateway.state.node, close};
}

// The tiny model's chat format written out by hand, so expected prompts do not come from the
// gateway's own template code.
export function handChatPrompt(tokenizer, messages) {
  const text = messages.map((m) => `<|turn>${m.role === "assistant" ? "model" : m.role}\n${m.content}<turn|>\n`).join("");
  return tokenizer.encode(`<bos>${text}<|turn>model\n`, {addBos: false, parseSpecial: true});
}

/** The ids a generation ends at: EOS and the tiny vocabulary's end-of-turn token. */
export function endIds(tokenizer) {
  return new Set([tokenizer.eos, ...tokenizer.encode("<turn|>", {addBos: false, parseSpecial: true})]);
}

/**
 * Greedy decoding straight through the Pipeline (a session of its own): {ids, text, logits}.
 * @example const ref = await greedy(pipeline, prompt, 8);
 */
export async function greedy(pipeline, prompt, maxTokens, session = `reference-${Math.random()}`) {
  const ends = endIds(pipeline.tokenizer);
  const ids = [];
  const logits = [];
  let input = prompt;
  try {
    while (ids.length < maxTokens) {
      const out = (await pipeline.step(session, input)).logits;
      const id = argmax(out);
      if (ends.has(id)) break;
      ids.push(id);
      logits.push(out);
      input = [id];
    }
  } finally {
    await pipeline.dropSession(session);
  }
  return {ids, logits, text: pipeline.tokenizer.decode(ids)};
}

/** Local nodes' session counts, in pipeline order. */
export function nodeSessions(pipeline) {
  return pipeline.nodes.map((node) => node.info().sessions);
}
