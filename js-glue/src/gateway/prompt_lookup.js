// Draft tokens by prompt lookup (docs/gateway.md, "Speculative decoding by prompt lookup"):
// the context's last n tokens, for n from maxNgram down to minNgram, found at their latest
// earlier occurrence, and the tokens that followed them there proposed as what comes next. A
// match close to the end may run into the draft itself (a loop of period p repeats), so a
// repeating context is drafted in full, not only up to its last period. A request's drafts
// back off when they are rejected (RequestDrafts), since a rejected draft costs its rows.

/** Speculative decoding when a gateway's settings do not say. */
export const DEFAULT_SPECULATIVE = 'off';

/**
 * A gateway's speculative settings -> PromptLookup's options, or null when off. mode:
 * 'prompt-lookup' or 'off' (undefined: DEFAULT_SPECULATIVE); name(setting) names a setting in
 * errors as its host spells it. Drafts stay within the positions a sliding layer's ring can
 * always cut back (its attn_chunk, 64: docs/gateway.md, "Prefix reuse"), so a rejection never
 * makes a node rebuild the session.
 * @example speculativeOptions({ mode: 'prompt-lookup', maxDraft: 8 }, (s) => s) // { maxDraft: 8, minNgram: 3 }
 */
export function speculativeOptions({ mode = DEFAULT_SPECULATIVE, maxDraft = 8, minNgram = 3 }, name) {
  if (mode !== 'prompt-lookup' && mode !== 'off') throw new Error(`${name('speculative')}: "${mode}" is not prompt-lookup or off`);
  if (mode === 'off') return null;
  if (maxDraft > 64) throw new Error(`${name('draft-max')}: ${maxDraft} is above 64, the positions a cut can always take back`);
  return { maxDraft, minNgram };
}

export class PromptLookup {
  /**
   * @param {{minNgram?: number, maxNgram?: number, maxDraft?: number}} [options] the n-gram
   *   lengths looked up and the most tokens drafted at once
   * @example new PromptLookup({ minNgram: 3, maxDraft: 8 }).draft([5, 6, 7, 8, 5, 6, 7], 8) // [8, 5, 6, 7, 8, 5, 6, 7]
   */
  constructor({ minNgram = 3, maxNgram = 5, maxDraft = 8 } = {}) {
    if (!(Number.isInteger(minNgram) && minNgram >= 1 && Number.isInteger(maxNgram) && maxNgram >= minNgram)) {
      throw new RangeError(`prompt lookup: n-gram lengths ${minNgram}..${maxNgram} are not 1 <= min <= max`);
    }
    if (!(Number.isInteger(maxDraft) && maxDraft >= 1)) throw new RangeError(`prompt lookup: maxDraft ${maxDraft} is not a positive integer`);
    Object.assign(this, { minNgram, maxNgram, maxDraft });
  }

  /** A request's drafter: draft() with its back-off (RequestDrafts). */
  forRequest() {
    return new RequestDrafts(this);
  }

  /** context [token ids] -> up to min(limit, maxDraft) drafted ids ([] when no n-gram recurs). */
  draft(context, limit = this.maxDraft) {
    const want = Math.min(limit, this.maxDraft);
    const end = context.length;
    if (want < 1) return [];
    for (let n = Math.min(this.maxNgram, end - 1); n >= this.minNgram; n--) {
      const from = latestEarlier(context, n);
      if (from < 0) continue;
      const out = [];
      for (let i = from; out.length < want; i++) out.push(i < end ? context[i] : out[i - end]);
      return out;
    }
    return [];
  }
}

// One request's drafting. A draft rejected from its first token halves the next drafts' length
// and skips drafting for 1, 3, 7, ... steps as such rejections follow one another, so a text the
// lookup keeps guessing wrong pays for a few short drafts, not one per step; a draft kept whole
// doubles the length again (up to maxDraft) and ends the streak.
class RequestDrafts {
  #lookup;
  #length;
  #wait = 0;
  #streak = 0;

  constructor(lookup) {
    this.#lookup = lookup;
    this.#length = lookup.maxDraft;
  }

  /** context -> the tokens to draft after it now, at most limit ([] while backing off). */
  next(context, limit) {
    if (this.#wait > 0) {
      this.#wait--;
      return [];
    }
    return this.#lookup.draft(context, Math.min(limit, this.#length));
  }

  /** What became of the last draft: `kept` of its `drafted` tokens were sampled as drafted. */
  verified(drafted, kept) {
    if (drafted === 0) return;
    if (kept === drafted) {
      this.#length = Math.min(this.#lookup.maxDraft, this.#length * 2);
      this.#streak = 0;
    } else if (kept === 0) {
      this.#streak++;
      this.#length = Math.max(1, this.#length >> 1);
      this.#wait = 2 ** this.#streak - 1;
    } else {
      this.#streak = 0;
    }
  }
}

// Where the tokens after the latest earlier occurrence of the context's last n tokens begin, or -1.
function latestEarlier(context, n) {
  const end = context.length;
  for (let s = end - n - 1; s >= 0; s--) {
    let k = 0;
    while (k < n && context[s + k] === context[end - n + k]) k++;
    if (k === n) return s + n;
  }
  return -1;
}
