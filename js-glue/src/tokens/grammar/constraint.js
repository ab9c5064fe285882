// One request's grammar state: which tokens keep the output a valid prefix of the grammar's
// language. Before each sampling the logits of the others become -Infinity, so the sampler
// (whatever it does) can only pick an allowed token; the token picked then advances the state.
// Where the constrained output starts (after a thought channel) is the caller's to say
// (gateway/thought_channel.js): it asks for masks and accepts tokens from there on.

export class Constraint {
  #matcher;
  #nVocab;
  #refused;
  #forbidden;

  /**
   * @param matcher an XGrammar GrammarMatcher (engine.js makes it)
   * @param {number} nVocab logits per row
   * @param {{refused?: Set<number>, forbidden?: Set<number>}} [options] refused: ids the grammar
   *   never allows (control tokens), turned down without asking the engine, which logs each
   *   refusal; forbidden: ids the grammar's text would allow that must not be sampled (a marker
   *   token inside JSON), masked after the engine's bitmask
   */
  constructor(matcher, nVocab, { refused = new Set(), forbidden = new Set() } = {}) {
    this.#matcher = matcher;
    this.#nVocab = nVocab;
    this.#refused = refused;
    this.#forbidden = forbidden;
  }

  /**
   * Sets every disallowed token's logit to -Infinity, in place.
   * @param {Float32Array} logits [n_vocab] one row
   * @example await constraint.mask(row); const id = sampler.sample(row); constraint.accept(id);
   */
  async mask(logits) {
    if (logits.length !== this.#nVocab) throw new RangeError(`a logits row of ${logits.length}, expected ${this.#nVocab}`);
    // Bit (id % 32) of word (id / 32) is set when token id is allowed; most words are all ones
    // (inside a string) or all zeros (between values), so whole words are settled at once.
    const bitmask = await this.#matcher.getNextTokenBitmask();
    const n = this.#nVocab;
    for (let w = 0; w < bitmask.length; w++) {
      const word = bitmask[w];
      if (word === -1) continue;
      const base = w * 32;
      const end = Math.min(base + 32, n);
      if (word === 0) {
        logits.fill(-Infinity, base, end);
        continue;
      }
      for (let id = base; id < end; id++) if (((word >>> (id - base)) & 1) === 0) logits[id] = -Infinity;
    }
    for (const id of this.#forbidden) logits[id] = -Infinity;
  }

  /** Advances past the sampled token `id`; false when the grammar does not allow it. */
  accept(id) {
    return this.#matcher.acceptToken(id);
  }

  /**
   * How many of `draft`'s tokens, from its start, the grammar allows in a row: a draft is cut
   * at its first bad token before the pipeline verifies it. The state is left as it was.
   * @example const kept = draft.slice(0, constraint.validPrefix(draft));
   */
  validPrefix(draft) {
    let n = 0;
    while (n < draft.length && !this.#refused.has(draft[n]) && !this.#forbidden.has(draft[n]) && this.#matcher.acceptToken(draft[n])) n++;
    if (n > 0) this.#matcher.rollBack(n);
    return n;
  }

  /** Whether the grammar's text is complete and only an end-of-turn token may follow. */
  get terminated() {
    return this.#matcher.isTerminated();
  }

  /** Frees the matcher; the constraint is unusable afterwards. */
  close() {
    this.#matcher?.dispose();
    this.#matcher = null;
  }
}
