// One request's generation: the prompt prefilled (past what its reused session already holds),
// then tokens step by step, sampled, checked against the end-of-turn ids and the stop strings,
// decoded and handed out as text deltas. With drafts (prompt lookup's, the MTP drafter's on the
// last node, or both), a decoding step also feeds the drafted tokens a policy finds worth
// verifying (draft_policy.js) and samples each position's logits in turn, keeping drafted tokens
// while they are what was sampled; the positions past the last one kept are cut from the
// session on every node. The sampler is called once per generated token in the same order
// either way, so the tokens are those of plain decoding, greedy or seeded (docs/gateway.md,
// "Speculative decoding by prompt lookup" and "Speculative decoding by MTP"). The MTP drafts of
// a step come with its logits, made assuming each row's argmax is sampled: the next step uses
// them only where the sampler did just that. When both sources propose, each source's policy
// says how many of its tokens to verify and what they are expected to gain; the larger gain wins.
// The loop looks at the request's signal before every step, so a client that went away (or a
// deadline) stops it at the next step. The choices of a request with n > 1 share its prefill:
// the first keeps the prompt's last logits in `prefill`, the next ones start from them in the
// session cut back to the prompt (run.js). With a constraint (response_format: tokens/grammar/;
// on Gemma 4, thought_channel.js over it, which also forces a thinking budget's end) every row's
// logits are masked to the tokens it allows before the sampler sees them, and a draft is cut at
// its first token it refuses before it is fed.
import { Sampler } from '../tokens/sampler.js';
import { DraftPolicy } from './draft_policy.js';
import { tokenLogprobs } from './logprobs.js';
import { StopText } from './stop_text.js';

/**
 * Generates for one request. Yields {text, token} per generated token (text: the new visible
 * text, maybe empty; token: {id, logprob, top} when logprobs are asked for, else {id}; null for
 * the text held back to the end), and returns
 * {finishReason: 'stop'|'length', completionTokens (sampled tokens, an end-of-turn one included),
 * history: every token the session's cache now holds, drafted, accepted: drafted tokens fed and kept,
 * firstTokenAt, lastTokenAt: performance.now() when the first and the last token were sampled}.
 * step(tokens, allRows, draft) answers {logits, draft}: the last position's logits, or with allRows every position's
 * [tokens.length, n_vocab], and with draft k > 0 the last node's MTP drafts after the step
 * ({after, token, ids}, pipeline_core.js; null when none); cut(n) keeps the session's first n positions (both on every node).
 * mtp: {maxDraft}, the most tokens the last node drafts at once, when the pipeline drafts by MTP; else null.
 * prefill: {logits} the logits after the whole prompt, set here when null, used in place of a
 * step when reused is the whole prompt (the session holds exactly it); index: the choice, whose
 * sampler draws from seed + index.
 * constraint: the choice's tokens/grammar/constraint.js TokenConstraint or thought_channel.js
 * ThoughtChannel (the same mask, accept and validPrefix), or null.
 * @param {{step: (tokens: number[], allRows?: boolean, draft?: number) => Promise<{logits: Float32Array, draft: object|null}>,
 *          cut?: (n: number) => Promise<unknown>, mtp?: {maxDraft: number},
 *          constraint?: import('../tokens/grammar/constraint.js').TokenConstraint | import('./thought_channel.js').ThoughtChannel,
 *          drafter?: import('./prompt_lookup.js').PromptLookup, tokenizer, prompt: number[], reused: number,
 *          endIds: Set<number>, request: object, maxTokens: number, signal?: AbortSignal,
 *          prefill?: {logits: Float32Array | null}, index?: number}} job
 * @example for await (const { text } of generate(job)) write(text);
 */
export async function* generate({ step, cut, drafter = null, mtp = null, tokenizer, prompt, reused, endIds, request, maxTokens, signal, prefill = null,
  index = 0, constraint = null }) {
  const sampler = new Sampler({ ...request.sampling, seed: (request.sampling.seed + index) >>> 0 });
  sampler.notePrompt(prompt);
  const stop = new StopText(request.stop);
  const history = prompt.slice(0, reused);
  const generated = [];
  let shown = 0;
  let input = prompt.slice(reused);
  let finishReason = null;
  let full = '';
  let sampled = 0;  // the end-of-turn token counts, as llama.cpp's server counts it
  let firstTokenAt = null;
  let lastTokenAt = null;
  const lookup = drafter ? { policy: new DraftPolicy(), propose: (limit) => drafter.draft([...history, ...input], limit) } : null;
  // The last step's MTP drafts, of use when the sampler kept `after` drafted rows and then `token`.
  let mtpDraft = null;
  let kept = 0;
  const mtpUsable = () => mtpDraft !== null && mtpDraft.after === kept && mtpDraft.token === input[0];
  const fromMtp = mtp ? { policy: new DraftPolicy(), propose: (limit) => (mtpUsable() ? mtpDraft.ids.slice(0, limit) : []) } : null;
  const sources = [lookup, fromMtp].filter((source) => source !== null);
  let drafted = 0;
  let accepted = 0;
  while (finishReason === null && generated.length < maxTokens) {
    signal?.throwIfAborted();
    // Drafts only after the prompt: verifying them costs a row each, a prompt's rows are paid already.
    const decoding = sources.length > 0 && input.length === 1;
    const { source, proposed } = decoding ? chooseDraft(sources, maxTokens - generated.length - 1) : { source: null, proposed: [] };
    const draft = constraint ? proposed.slice(0, await constraint.validPrefix(proposed)) : proposed;
    const fed = [...input, ...draft];
    // As many MTP drafts as its policy would verify at the next step, so a drafter whose drafts
    // are rejected costs no drafting until its estimate recovers.
    const askMtp = fromMtp && input.length > 0 ? fromMtp.policy.length(mtp.maxDraft) : 0;
    const t0 = performance.now();
    const answered = input.length === 0 ? { logits: prefill.logits, draft: null } : await step(fed, draft.length > 0, askMtp);
    const { logits } = answered;
    mtpDraft = answered.draft;
    let stepMs = performance.now() - t0;
    history.push(...fed);
    const nVocab = logits.length / (draft.length > 0 ? fed.length : 1);
    if (prefill && prefill.logits === null) prefill.logits = logits.slice(0, nVocab);
    // Row r of the drafted step: the position after input and the first r drafted tokens.
    let r = 0;
    for (;;) {
      const rowLogits = draft.length > 0 ? logits.subarray(r * nVocab, (r + 1) * nVocab) : logits;
      // The grammar masks a copy where the unmasked row is still needed: for logprobs (the
      // model's distribution, before the mask as before temperature) and the prompt's logits,
      // which the next choices start from.
      const masked = constraint && (request.logprobs || logits === prefill?.logits) ? rowLogits.slice() : rowLogits;
      if (constraint) await constraint.mask(masked);
      const id = sampler.sample(masked);
      sampled++;
      lastTokenAt = performance.now();
      firstTokenAt ??= lastTokenAt;
      if (endIds.has(id)) {
        finishReason = 'stop';
        break;
      }
      if (constraint && !(await constraint.accept(id))) throw new Error(`the grammar refused token ${id}, which its own mask allowed`);
      const token = request.logprobs ? tokenLogprobs(rowLogits, id, request.topLogprobs) : { id };
      sampler.accept(id);
      generated.push(id);
      // The whole continuation is decoded each time: a character's bytes may span tokens.
      full = tokenizer.decode(generated);
      const visible = stop.update(full);
      yield { text: visible.text.slice(shown), token };
      shown = Math.max(shown, visible.text.length);
      if (visible.stopped) {
        finishReason = 'stop';
        full = visible.text;
        break;
      }
      if (r < draft.length && id === draft[r]) {
        r++;
        continue;
      }
      input = [id];
      break;
    }
    if (r < draft.length) {
      history.length -= draft.length - r;
      const t1 = performance.now();
      await cut(history.length);
      stepMs += performance.now() - t1;
    }
    kept = r;
    // Drafts made for a continuation the sampler did not take cost as much as rejected ones.
    if (fromMtp && finishReason === null && mtpDraft?.ids.length > 0 && !mtpUsable()) fromMtp.policy.dropped();
    if (decoding) {
      for (const other of sources) {
        if (draft.length === 0) other.policy.stepped(0, 0, stepMs, askMtp);
        else if (other === source) other.policy.stepped(draft.length, r, stepMs, askMtp);
        else other.policy.passed();
      }
    }
    drafted += draft.length;
    accepted += r;
  }
  // What was held back as a possible start of a stop sequence is text after all.
  if (full.length > shown) yield { text: full.slice(shown), token: null };
  return { finishReason: finishReason ?? 'length', completionTokens: sampled, history, drafted, accepted, firstTokenAt, lastTokenAt };
}

// Of the sources' proposals (each at most `limit` tokens), the one whose policy expects the most
// from verifying it, and as much of it as that policy would verify; the first source wins a tie.
function chooseDraft(sources, limit) {
  let best = { source: null, proposed: [], gain: 1 };
  for (const source of sources) {
    const found = source.propose(Math.max(0, limit));
    const { length, gain } = source.policy.choose(found.length);
    if (length > 0 && gain > best.gain) best = { source, proposed: found.slice(0, length), gain };
  }
  return best;
}
