// What the HTTP layer remembers of sessions beyond their KV caches: the last idempotent forward
// of each session (so the coordinator's retry after a lost response does not run twice), and
// which ids this process created (so a session that vanished is reported as evicted rather than
// unknown).

const MAX_CREATED = 4096;

export class SessionRecords {
  #created = new Set();   // ids created here and not deleted, oldest first (bounded)
  #replies = new Map();   // id -> { key, startPos, lastOnly, reply }

  created(id) {
    this.#created.delete(id);
    this.#created.add(id);
    if (this.#created.size > MAX_CREATED) this.#created.delete(this.#created.values().next().value);
  }

  deleted(id) {
    this.#created.delete(id);
    this.#replies.delete(id);
  }

  /** Why a session this process does not hold is gone: 'evicted' when it was created here. */
  whyGone(id) {
    return this.#created.has(id) ? 'evicted' : null;
  }

  /**
   * Keeps `reply` as the answer to a repeat of this forward; drops the replies of sessions that
   * `exists` no longer finds, so they do not outlive their KV caches.
   */
  remember(id, key, startPos, lastOnly, reply, exists) {
    this.#replies.delete(id);
    for (const other of this.#replies.keys()) if (!exists(other)) this.#replies.delete(other);
    this.#replies.set(id, { key, startPos, lastOnly, reply });
  }

  /** The stored reply of an identical earlier forward (same key, start_pos and last_only), or null. */
  replay(id, key, startPos, lastOnly) {
    const entry = this.#replies.get(id);
    if (!entry || key === undefined || entry.key !== key || entry.startPos !== startPos || entry.lastOnly !== lastOnly) return null;
    return entry.reply;
  }
}
