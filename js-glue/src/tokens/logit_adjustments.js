// What a request adds to the model's logits before its next token is chosen, in llama.cpp's
// order (its logit-bias sampler first, then its penalties sampler):
//   1. logit_bias: the given value added to the token's logit (OpenAI; -100 bans a token in
//      practice, +100 all but forces it);
//   2. repetition_penalty r, over every token of the prompt and of the generation so far (vLLM's
//      set; llama.cpp's window of the last tokens is its own default): a positive logit divided
//      by r, any other multiplied by it;
//   3. presence_penalty a and frequency_penalty f, over the generated tokens only (OpenAI): the
//      logit of a token generated c > 0 times minus c·f + a.
// Only the touched tokens are visited, so the cost is that of the tokens seen, not the vocabulary.

export class LogitAdjustments {
  #generated = new Map();  // id -> times generated
  #seen = new Set();       // ids of the prompt and the generation (the repetition penalty's set)

  /**
   * @param {{logitBias?: Map<number, number>, repetitionPenalty?: number, presencePenalty?: number,
   *          frequencyPenalty?: number}} options
   * @example new LogitAdjustments({ logitBias: new Map([[42, -100]]), frequencyPenalty: 0.5 })
   */
  constructor({ logitBias = new Map(), repetitionPenalty = 1, presencePenalty = 0, frequencyPenalty = 0 } = {}) {
    this.logitBias = logitBias;
    this.repetitionPenalty = repetitionPenalty;
    this.presencePenalty = presencePenalty;
    this.frequencyPenalty = frequencyPenalty;
  }

  /** Whether any logit can change: without, the sampler reads the model's logits in place. */
  get active() {
    return this.logitBias.size > 0 || this.repetitionPenalty !== 1 || this.presencePenalty !== 0 || this.frequencyPenalty !== 0;
  }

  /** The prompt's tokens, for the repetition penalty; an image's rows (negative ids) are none. */
  notePrompt(ids) {
    if (this.repetitionPenalty === 1) return;
    for (const id of ids) if (id >= 0) this.#seen.add(id);
  }

  /** A generated token. */
  accept(id) {
    this.#generated.set(id, (this.#generated.get(id) ?? 0) + 1);
    if (this.repetitionPenalty !== 1) this.#seen.add(id);
  }

  /** Adjusts x [n_vocab] (a copy of the model's logits) in place. */
  apply(x) {
    for (const [id, bias] of this.logitBias) if (id < x.length) x[id] += bias;
    const r = this.repetitionPenalty;
    if (r !== 1) {
      for (const id of this.#seen) if (id < x.length) x[id] = x[id] > 0 ? x[id] / r : x[id] * r;
    }
    if (this.presencePenalty !== 0 || this.frequencyPenalty !== 0) {
      for (const [id, count] of this.#generated) if (id < x.length) x[id] -= count * this.frequencyPenalty + this.presencePenalty;
    }
  }
}
