// How many of the tokens prompt lookup drafts one request verifies at a step: as many as
// maximize the expected tokens per unit of time, and none when no length beats plain decoding
// by MIN_GAIN (docs/gateway.md, "Speculative decoding by prompt lookup"). A step of 1 + d rows
// costs (1 + β·d) plain steps, β measured from the request's own step times (the nodes' kernels,
// their batching with other requests and the network all show in it); drafted tokens are kept
// one after another with probability q, so d drafted tokens yield 1 + q + … + q^d tokens. q is
// a running estimate over the request's recent drafts: a draft rejected from its first token
// pulls it down hard, so a text the lookup guesses wrong stops drafting within a few steps; plain
// steps let it drift back toward its prior, so such a request tries again now and then (a probe
// of one token) and one whose text turned repetitive finds out. β is a drafted step's time over
// a plain step's: one that verifies nothing and has the last node draft nothing (MTP drafting
// costs as much as the verified rows may, and a drafted step's time holds both); until such a
// step was timed, a request makes one after its first draft (the prior β may be far off; that
// first draft's own time, often a cold one, is not taken for β).

const PRIOR_Q = 0.75;        // a first draft of one token is worth trying: 1.75 tokens for 1.5 steps
const DRAFT_WEIGHT = 0.3;    // of a draft's outcome in q
const RECOVERY = 0.05;       // of the prior in q, per plain step
const MIN_GAIN = 1.1;
const PRIOR_ROW_COST = 0.5;  // β of a 31b-shape layer node on one thread (docs/benchmarks.md)
const TIME_WEIGHT = 0.3;     // of a new step time in the running averages

export class DraftPolicy {
  #q = PRIOR_Q;
  #plainMs = null;
  #rowCost = PRIOR_ROW_COST;
  #unpriced = false;  // a draft was verified before any plain step was timed

  /** Of `available` drafted tokens, how many to verify now (0: a plain step). */
  length(available) {
    return this.choose(available).length;
  }

  /**
   * Of `available` drafted tokens, how many to verify now and the expected tokens per plain
   * step's time they give ({length: 0, gain: 1} for a plain step), to weigh drafts of two
   * sources against each other.
   */
  choose(available) {
    let best = { length: 0, gain: 1 };
    if (this.#unpriced) return best;
    let expected = 1;
    let qd = 1;
    for (let d = 1; d <= available; d++) {
      qd *= this.#q;
      expected += qd;
      const gain = expected / (1 + this.#rowCost * d);
      if (gain > Math.max(MIN_GAIN, best.gain)) best = { length: d, gain };
    }
    return best;
  }

  /**
   * MTP drafts were made for a continuation the sampler did not take (at a temperature above 0):
   * paid for, and of no use, as a draft rejected at its first token.
   */
  dropped() {
    this.#q += DRAFT_WEIGHT * (0 - this.#q);
  }

  /** A decoding step verified another source's draft: none of this one's, and no plain step's time. */
  passed() {
    this.#q += RECOVERY * (PRIOR_Q - this.#q);
  }

  /**
   * A decoding step ended: `drafted` tokens verified (0: none), `kept` of them sampled as
   * drafted, `ms` its pipeline step and cut took, `asked` MTP drafts the last node made in it.
   */
  stepped(drafted, kept, ms, asked = 0) {
    if (drafted === 0) {
      this.#q += RECOVERY * (PRIOR_Q - this.#q);
      if (asked > 0) return;
      this.#plainMs = this.#plainMs === null ? ms : this.#plainMs + TIME_WEIGHT * (ms - this.#plainMs);
      this.#unpriced = false;
      return;
    }
    // The draft's own estimate of q: kept tokens over the tries, a rejection being the last try.
    const observed = kept === drafted ? 1 : kept / (kept + 1);
    this.#q += DRAFT_WEIGHT * (observed - this.#q);
    if (this.#plainMs === null) {
      this.#unpriced = true;
      return;
    }
    const rowCost = Math.min(2, Math.max(0.02, (ms / this.#plainMs - 1) / drafted));
    this.#rowCost += TIME_WEIGHT * (rowCost - this.#rowCost);
  }
}
