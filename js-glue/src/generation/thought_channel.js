// Where a Gemma 4 answer's thought channel `<|channel>thought … <channel|>` ends, token by token,
// for what must happen there: a response_format's constraint starts after it (the thought is not
// the JSON), and a thinking budget closes it after N tokens by forcing its closing marker, as
// llama.cpp's reasoning budget does (common/reasoning-budget.cpp): the tokens after the start
// tag `<|channel>thought` are counted, and when N have been sampled without the model closing
// the channel, the budget message's tokens and `<channel|>` are the only tokens left, one per
// step. The answer then goes on as the model writes it.
//
// The first token decides whether there is a channel: `<|channel>` opens one; any other token
// is the answer's first (E2B and E4B write no channel with thinking off, 26B and 31B an empty
// one). With a constraint that first token is either `<|channel>` or one the grammar allows.
// Once the constraint has started, the channel's markers are never allowed: they decode to
// text the grammar would take inside a string, and a reader would take them for a channel.

/** The ids of Gemma 4's channel markers, or null when the vocabulary has none. */
export function channelMarkers(tokenizer) {
  const one = (text) => {
    const ids = tokenizer.encode(text, { addBos: false, parseSpecial: true });
    return ids.length === 1 && tokenizer.piece(ids[0]) === text ? ids[0] : null;
  };
  const open = one('<|channel>');
  const close = one('<channel|>');
  if (open === null || close === null) return null;
  const label = tokenizer.encode('thought', { addBos: false, parseSpecial: false });
  return { open, close, label: label.length === 1 ? label[0] : null };
}

/**
 * One choice's thought channel, with the interface decode.js asks of a constraint (mask,
 * accept, validPrefix), over the choice's constraint or none: the constraint is asked only from
 * the answer's first token on.
 */
export class ThoughtChannel {
  #markers;
  #constraint;
  #budget;
  #forced;
  #state = 'first';  // first | label (after <|channel>) | thinking | forcing | answer
  #remaining = Infinity;
  #forcedAt = 0;

  /**
   * @param {{open: number, close: number, label: number | null}} markers channelMarkers()
   * @param {{constraint?: import('../tokens/grammar/constraint.js').TokenConstraint | null, budget?: number | null,
   *          message?: number[]}} options constraint: the answer's, from its first token;
   *   budget: thought tokens before the channel is closed (null: no limit); message: tokens
   *   forced before `<channel|>` when the budget closes it
   * @example const gate = new ThoughtChannel(markers, { constraint, budget: 64 });
   */
  constructor(markers, { constraint = null, budget = null, message = [] } = {}) {
    this.#markers = markers;
    this.#constraint = constraint;
    this.#budget = budget ?? Infinity;
    this.#forced = [...message, markers.close];
  }

  /** Sets the logits of every token not allowed next to -Infinity, in place. */
  async mask(logits) {
    const { open, close } = this.#markers;
    if (this.#state === 'forcing') {
      logits.fill(-Infinity);
      logits[this.#forced[this.#forcedAt]] = 0;
    } else if (this.#state === 'first' && this.#constraint) {
      const opening = logits[open];
      await this.#constraint.mask(logits);
      logits[open] = opening;
    } else if (this.#state === 'answer' && this.#constraint) {
      await this.#constraint.mask(logits);
      logits[open] = -Infinity;
      logits[close] = -Infinity;
    }
  }

  /** Advances past the sampled token `id`; false when the constraint does not allow it. */
  async accept(id) {
    const { open, close, label } = this.#markers;
    switch (this.#state) {
      case 'first':
        if (id === open) {
          this.#state = 'label';
          return true;
        }
        return this.#answer(id);
      case 'label':
        this.#state = 'thinking';
        this.#remaining = this.#budget;
        if (id === label) break;
        return this.#thought(id);
      case 'thinking':
        return this.#thought(id);
      case 'forcing':
        if (id !== this.#forced[this.#forcedAt]) return false;
        if (++this.#forcedAt === this.#forced.length) this.#state = 'answer';
        return true;
      default:
        return this.#constraint ? this.#constraint.accept(id) : true;
    }
    if (this.#remaining <= 0) this.#state = 'forcing';
    return true;
  }

  #thought(id) {
    if (id === this.#markers.close) this.#state = 'answer';
    else if (--this.#remaining <= 0) this.#state = 'forcing';
    return true;
  }

  async #answer(id) {
    this.#state = 'answer';
    return this.#constraint ? this.#constraint.accept(id) : true;
  }

  /**
   * How many of `draft`'s tokens, from its start, are worth verifying: in the answer, those the
   * constraint allows (no channel marker among them); in a thought, those within the budget;
   * none where the next token is still to be decided (the first, a forced one, the label).
   */
  async validPrefix(draft) {
    if (this.#state === 'thinking') return Math.min(draft.length, this.#remaining);
    if (this.#state !== 'answer') return 0;
    if (!this.#constraint) return draft.length;
    const { open, close } = this.#markers;
    const marker = draft.findIndex((id) => id === open || id === close);
    return this.#constraint.validPrefix(marker === -1 ? draft : draft.slice(0, marker));
  }

  /** Frees the constraint. */
  close() {
    this.#constraint?.close();
  }
}

/**
 * What each of a request's n choices keeps its output to: its constraint (or nothing) as is, or,
 * for a chat on a Gemma 4 model (markers non-null) with a constraint or a thinking budget, a
 * ThoughtChannel over it. The budget message is the client's text: never control tokens.
 * @example const outputs = choiceOutputs(tokenizer, markers, request, constraints);
 */
export function choiceOutputs(tokenizer, markers, request, constraints) {
  const budget = request.kind === 'chat' ? request.thinkingBudget : null;
  if (!markers || request.kind !== 'chat' || (constraints === null && budget === null)) return constraints;
  const text = new TextEncoder().encode(budget?.message ?? '');
  const message = text.length > 0 ? tokenizer.encode(text, { addBos: false, untrusted: [0, text.length] }) : [];
  return Array.from({ length: request.n }, (_, i) => new ThoughtChannel(markers, { constraint: constraints?.[i] ?? null, budget: budget?.tokens ?? null, message }));
}
