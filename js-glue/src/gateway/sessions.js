// Prefix reuse across chat turns. A chat client resends the whole conversation each turn; the
// sessions of finished requests are kept (their token history here, their KV caches on the
// nodes), and a new request whose prompt starts with a kept history continues that session,
// prefilling only the rest. The engine has no operation that cuts a KV cache back to an earlier
// position (a forward must start at the session's length, and a sliding layer's ring has
// overwritten old slots: docs/gateway.md), so only a history that is a whole prefix of the new
// prompt is reused; anything else starts cold. The answer is the same bytes either way: a
// session continued from position p holds the cache a cold prefill would (chunked input gives
// the same cache as one call), which tests/js/gateway_prefix.test.mjs checks.
export class SessionCache {
  #idle = new Map();  // session -> token history, least recently used first
  #next = 0;

  /**
   * @param {number} maxIdle sessions kept between requests (the oldest is dropped on the nodes
   *   beyond it; the nodes also evict by their own KV budget, and the pipeline replays a session
   *   a node evicted)
   */
  constructor(maxIdle) {
    this.maxIdle = maxIdle;
  }

  /** Sessions kept for reuse. */
  get size() {
    return this.#idle.size;
  }

  /**
   * A session for `prompt`: the kept one with the longest history that is a strict prefix of it
   * (taken out of the cache while in use), or a new one -> {session, reused: positions kept}.
   * @example const { session, reused } = cache.take(tokens); pipeline.step(session, tokens.slice(reused));
   */
  take(prompt) {
    let best = null;
    for (const [session, history] of this.#idle) {
      if (history.length < prompt.length && history.length > (best?.reused ?? 0) && history.every((t, i) => t === prompt[i])) {
        best = { session, reused: history.length };
      }
    }
    if (!best) return { session: `chat-${this.#next++}`, reused: 0 };
    this.#idle.delete(best.session);
    return best;
  }

  /**
   * Keeps a finished request's session with the tokens its cache holds; drop(session) forgets
   * the oldest beyond maxIdle on the nodes.
   */
  async keep(session, history, drop) {
    if (this.maxIdle === 0) return drop(session);
    this.#idle.set(session, history);
    const dropped = [];
    for (const old of this.#idle.keys()) {
      if (this.#idle.size <= this.maxIdle) break;
      this.#idle.delete(old);
      dropped.push(drop(old));
    }
    await Promise.all(dropped);
  }
}
