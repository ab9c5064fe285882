// Prefix reuse across chat turns. A chat client resends the whole conversation each turn; the
// sessions of finished requests are kept (their token history here, their KV caches on the
// nodes), and a new request continues the kept session that shares the longest prefix with its
// prompt, prefilling only the rest. A history that goes on past the shared prefix (a
// regenerated answer, an edited last message, a tokenizer edge) is cut back to it first
// (Pipeline.truncate; docs/gateway.md, "Sessions and prefix reuse"), which a sliding layer's
// ring allows only for the last attn_chunk positions: a refused cut starts cold (run.js). The
// answer is the same bytes either way: a session continued from position p holds the cache a
// cold prefill would (chunked input gives the same cache as one call, a cut the cache of the
// positions kept), which tests/js/gateway/sessions.test.mjs checks.
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
   * A session for `prompt`: the kept one sharing the longest prefix with it, at most all of the
   * prompt but its last token (a step needs a new token), taken out of the cache while in use;
   * among equals one that needs no cut; or a new one -> {session, reused: positions kept, cut:
   * whether the session holds more than those (to cut back before the first step)}. A session
   * is cut back only when it keeps at least as many positions as it loses: another chat that
   * shares only its start (the chat template, a short system prompt) does not take it from the
   * conversation it holds.
   * @example const { session, reused, cut } = cache.take(tokens); if (cut) await pipeline.truncate(session, reused);
   */
  take(prompt) {
    let best = null;
    for (const [session, history] of this.#idle) {
      const reused = sharedPrefix(history, prompt, prompt.length - 1);
      const cut = history.length > reused;
      if (history.length - reused > reused) continue;
      if (reused > (best?.reused ?? 0) || (reused > 0 && reused === best.reused && best.cut && !cut)) best = { session, reused, cut };
    }
    if (!best) return { session: this.newSession(), reused: 0, cut: false };
    this.#idle.delete(best.session);
    return best;
  }

  /** A session id no kept or running session has. */
  newSession() {
    return `chat-${this.#next++}`;
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

/**
 * How many leading tokens a and b share, at most `limit`.
 * @example sharedPrefix([2, 5, 7], [2, 5, 9, 4], 3) // 2
 */
export function sharedPrefix(a, b, limit) {
  const n = Math.min(a.length, b.length, limit);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}
