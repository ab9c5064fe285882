// What the HTTP layer remembers of sessions beyond their KV caches: the last idempotent forward
// of each session (so the coordinator's retry after a lost response does not run twice), and
// which ids this process created (so a session that vanished is reported as evicted rather than
// unknown). A remembered forward is kept with a fingerprint of the whole request, so a key sent
// again with another request is refused rather than answered with the first one's output.
import { HttpError } from './http_error.js';

const MAX_CREATED = 4096;

const hex = (buffer) => Array.from(new Uint8Array(buffer), (b) => b.toString(16).padStart(2, '0')).join('');

/**
 * What identifies a forward for its Idempotency-Key: the route, every parameter as parsed
 * (start_pos, last_only, the approximate modes, the exit state) and the SHA-256 of the body.
 * @example const fingerprint = await requestFingerprint({ session: 's', startPos: 0, lastOnly: false, approx: {}, exitState: null, body });
 */
export async function requestFingerprint({ session, startPos, lastOnly, span = false, approx, exitState, body }) {
  const sorted = (value) => (value && typeof value === 'object' && !Array.isArray(value)
    ? Object.fromEntries(Object.keys(value).sort().map((key) => [key, sorted(value[key])]))
    : value);
  const parameters = JSON.stringify(sorted({ route: `POST /v1/sessions/${session}/forward`, startPos, lastOnly, span, approx, exitState }));
  return `${parameters} sha256:${hex(await crypto.subtle.digest('SHA-256', body))}`;
}

export class SessionRecords {
  #created = new Set();   // ids created here and not deleted, oldest first (bounded)
  #replies = new Map();   // id -> { key, fingerprint, reply }

  created(id) {
    this.#created.delete(id);
    this.#created.add(id);
    if (this.#created.size > MAX_CREATED) this.#created.delete(this.#created.values().next().value);
  }

  deleted(id) {
    this.#created.delete(id);
    this.#replies.delete(id);
  }

  /** The session was cut back: its last forward's reply no longer describes its cache. */
  truncated(id) {
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
  remember(id, key, fingerprint, reply, exists) {
    this.#replies.delete(id);
    for (const other of this.#replies.keys()) if (!exists(other)) this.#replies.delete(other);
    this.#replies.set(id, { key, fingerprint, reply });
  }

  /**
   * The stored reply of the session's last forward when it had this key and was the same
   * request; null when the key is not that forward's. The key of that forward with another
   * request is 422 idempotency_mismatch.
   */
  replay(id, key, fingerprint) {
    const entry = this.#replies.get(id);
    if (!entry || key === undefined || entry.key !== key) return null;
    if (entry.fingerprint !== fingerprint) {
      throw new HttpError('idempotency_mismatch', `Idempotency-Key ${JSON.stringify(key)} was sent with another request to session "${id}" ` +
        '(its start_pos, last_only, approximate modes, exit state or body differ): a new request needs a new key');
    }
    return entry.reply;
  }
}
