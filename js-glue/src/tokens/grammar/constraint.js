// One request's grammar state: which tokens keep the output a valid prefix of the grammar's
// language. Before each sampling the logits of the others become -Infinity, so the sampler
// (whatever it does) can only pick an allowed token; the token picked then advances the state.
// Where the constrained output starts (after a thought channel) is the caller's to say
// (generation/thought_channel.js): it asks for masks and accepts tokens from there on.

/**
 * Sets to -Infinity, in place, the logits of the tokens a bitmask refuses: bit (id % 32) of word
 * (id / 32) is set when token id is allowed.
 * @example applyBitmask(row, await constraint.bitmask());
 */
export function applyBitmask(logits, bitmask) {
  // Most words are all ones (inside a string) or all zeros (between values), so whole words are
  // settled at once.
  const n = logits.length;
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
}

/**
 * What every constraint offers the generation loop, whether its engine runs here (Constraint)
 * or on a thread of its own (generation/grammar_thread.js): the calls are asynchronous so either
 * can serve them. accept(id) answers whether the grammar takes the token, except on a thread,
 * where it answers true and a refusal fails the constraint's next call.
 * @typedef {{mask(logits: Float32Array): Promise<void>, accept(id: number): Promise<boolean>,
 *            validPrefix(draft: number[]): Promise<number>, close(): void}} TokenConstraint
 */

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
   *   token inside JSON), cleared from the engine's bitmask
   */
  constructor(matcher, nVocab, { refused = new Set(), forbidden = new Set() } = {}) {
    this.#matcher = matcher;
    this.#nVocab = nVocab;
    this.#refused = refused;
    this.#forbidden = forbidden;
  }

  /** The tokens allowed next, as applyBitmask reads them: Int32Array [ceil(n_vocab / 32)]. */
  async bitmask() {
    const bitmask = Int32Array.from(await this.#matcher.getNextTokenBitmask());
    for (const id of this.#forbidden) bitmask[id >>> 5] &= ~(1 << (id & 31));
    return bitmask;
  }

  /**
   * Sets every disallowed token's logit to -Infinity, in place.
   * @param {Float32Array} logits [n_vocab] one row
   * @example await constraint.mask(row); const id = sampler.sample(row); await constraint.accept(id);
   */
  async mask(logits) {
    checkRow(logits, this.#nVocab);
    applyBitmask(logits, await this.bitmask());
  }

  /** Advances past the sampled token `id`; false when the grammar does not allow it. */
  async accept(id) {
    return this.#matcher.acceptToken(id);
  }

  /**
   * How many of `draft`'s tokens, from its start, the grammar allows in a row: a draft is cut
   * at its first bad token before the pipeline verifies it. The state is left as it was.
   * @example const kept = draft.slice(0, await constraint.validPrefix(draft));
   */
  async validPrefix(draft) {
    let n = 0;
    while (n < draft.length && !this.#refused.has(draft[n]) && !this.#forbidden.has(draft[n]) && this.#matcher.acceptToken(draft[n])) n++;
    if (n > 0) this.#matcher.rollBack(n);
    return n;
  }

  /** Frees the matcher; the constraint is unusable afterwards. */
  close() {
    this.#matcher?.dispose();
    this.#matcher = null;
  }
}

/** A logits row must hold one logit per token of the vocabulary. */
export function checkRow(logits, nVocab) {
  if (logits.length !== nVocab) throw new RangeError(`a logits row of ${logits.length}, expected ${nVocab}`);
}
