// Draft tokens by prompt lookup (docs/gateway.md, "Speculative decoding by prompt lookup"):
// the context's last n tokens, for n from maxNgram down to minNgram, found at their latest
// earlier occurrence, and the tokens that followed them there proposed as what comes next. A
// match close to the end may run into the draft itself (a loop of period p repeats), so a
// repeating context is drafted in full, not only up to its last period. How much of a draft
// is worth verifying is draft_policy.js's to say.
import { isPlaceholder } from './media.js';

/** Speculative decoding when a gateway's settings do not say. */
export const DEFAULT_SPECULATIVE = 'off';

/**
 * A gateway's speculative settings -> the Model's speculative options, or null when off. mode:
 * 'prompt-lookup', 'mtp' (the MTP drafter's drafts on the last node, with prompt lookup's where
 * it finds a match: docs/gateway.md, "Speculative decoding by MTP") or 'off' (undefined:
 * DEFAULT_SPECULATIVE); name(setting) names a setting in errors as its host spells it. Drafts
 * stay within the positions a sliding layer's ring can always cut back (its attn_chunk, 64:
 * docs/gateway.md, "Sessions and prefix reuse"), so a rejection never makes a node rebuild the session.
 * @example speculativeOptions({ mode: 'prompt-lookup', maxDraft: 8 }, (s) => s) // { maxDraft: 8, minNgram: 3 }
 */
export function speculativeOptions({ mode = DEFAULT_SPECULATIVE, maxDraft = 8, minNgram = 3 }, name) {
  if (!['prompt-lookup', 'mtp', 'off'].includes(mode)) throw new Error(`${name('speculative')}: "${mode}" is not prompt-lookup, mtp or off`);
  if (mode === 'off') return null;
  if (maxDraft > 64) throw new Error(`${name('draft-max')}: ${maxDraft} is above 64, the positions a cut can always take back`);
  return mode === 'mtp' ? { maxDraft, minNgram, mtp: true } : { maxDraft, minNgram };
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

  /**
   * context [token ids] -> up to min(limit, maxDraft) drafted ids ([] when no n-gram recurs), none
   * of an image's placeholders (media.js): a draft stops where one would follow.
   */
  draft(context, limit = this.maxDraft) {
    const want = Math.min(limit, this.maxDraft);
    const end = context.length;
    if (want < 1) return [];
    for (let n = Math.min(this.maxNgram, end - 1); n >= this.minNgram; n--) {
      const from = latestEarlier(context, n);
      if (from < 0) continue;
      const out = [];
      for (let i = from; out.length < want; i++) out.push(i < end ? context[i] : out[i - end]);
      const image = out.findIndex(isPlaceholder);
      return image < 0 ? out : out.slice(0, image);
    }
    return [];
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
