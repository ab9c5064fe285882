// A LayerNode's sessions: one KV cache (an lf_session*) per session id, least recently used
// first, within the node's limits (maxSessions, maxKvBytes). A new session that does not fit
// evicts the least recently used others, but only once its first forward has succeeded, and an
// id evicted is remembered (a bounded number of them) so that a later call continuing it gets a
// clear 'evicted' error. While an engine step runs, its sessions are marked running: a read of
// what their last forward left is refused, and a session dropped meanwhile is freed after it.
import { LayerfoldError } from '../wasm/capi.js';
import { closedError } from './engine_model.js';

// Evicted ids remembered, so the set stays bounded however many sessions come and go; a call
// continuing an id older than these gets 'unknown_session' instead of 'evicted'.
const EVICTED_REMEMBERED = 1024;

/**
 * Cuts engine session `session` (an lf_session*, no forward on it running) to nPast positions, or
 * back to its latest checkpoint before them (lf_session_truncate). -> the positions it then holds
 * @example const held = truncateSession(lf, session, 12);
 */
export function truncateSession(lf, session, nPast) {
  const reached = lf.fn.lf_session_truncate(session, nPast);
  if (reached < 0) throw lf.lastError();
  return reached;
}

/**
 * Keeps a checkpoint of engine session `session` at its length, at most `keep`
 * (lf_session_checkpoint). -> the position checkpointed
 * @example checkpointSession(lf, session, 4);
 */
export function checkpointSession(lf, session, keep) {
  if (!lf.fn.lf_session_checkpoint(session, keep)) throw lf.lastError();
  return lf.fn.lf_session_n_past(session);
}

export class SessionTable {
  #lf;
  #model;                 // EngineModel
  #limits;                // { maxContext, maxSessions, maxKvBytes }
  #held = new Map();      // id -> lf_session*, least recently used first
  #evicted = new Set();   // recently evicted ids, oldest first
  #running = new Map();   // lf_session* -> its startPos, for the sessions of the step running
  #pending = new Map();   // id -> lf_session*, the new sessions of the step running, registered once it succeeds
  #dropAfterStep = [];    // sessions dropped while the running step used them

  /** @example const sessions = new SessionTable(lf, model, { maxContext: 0, maxSessions: 64, maxKvBytes: Infinity }); */
  constructor(lf, model, { maxContext, maxSessions, maxKvBytes }) {
    this.#lf = lf;
    this.#model = model;
    this.#limits = { maxContext, maxSessions, maxKvBytes };
  }

  /**
   * The session's KV cache for a call: { handle, fresh }, the one held or a new one (its first
   * call, startPos 0) not yet registered. Nothing about the held sessions changes here: settle()
   * does that once the engine has answered the call.
   */
  forCall(id, startPos) {
    const lf = this.#lf;
    const { maxContext, maxSessions, maxKvBytes } = this.#limits;
    const held = this.#held.get(id);
    if (held !== undefined) return { handle: held, fresh: false };
    if (startPos !== 0 && this.#evicted.has(id)) {
      throw new LayerfoldError('evicted', `session "${id}" was evicted (least recently used, limits: ` +
        `${maxSessions} sessions, ${maxKvBytes} KV bytes): start it again from position 0`);
    }
    const handle = lf.fn.lf_session_create(this.#model.ptr, maxContext);
    if (!handle) throw lf.lastError();
    const bytes = lf.fn.lf_session_bytes(handle);
    if (bytes > maxKvBytes) {
      lf.fn.lf_session_free(handle);
      throw new LayerfoldError('resource_exhausted', `a session needs ${bytes} KV-cache bytes, more than maxKvBytes ${maxKvBytes}`);
    }
    return { handle, fresh: true };
  }

  /**
   * The least recently used sessions a new session of this step displaces to meet the limits,
   * none of the step's own (step.ids, and the new sessions before it, step.fresh, which count as
   * held); nothing is evicted here (settle() does it once its forward succeeded). null when the
   * limits cannot be met without one of the step's sessions, or when another new session of the
   * step already displaces some: the sessions displaced are freed only after the step, so one
   * per step bounds what the node holds beyond its limits to one session's cache. The call then
   * waits for the next step, where it goes first and always fits.
   */
  room(id, handle, step) {
    const { maxSessions, maxKvBytes } = this.#limits;
    const bytes = (session) => this.#lf.fn.lf_session_bytes(session);
    const fits = (count, total) => count < maxSessions && total <= maxKvBytes;
    const held = [...this.#held, ...step.fresh];
    let count = held.length;
    let total = held.reduce((sum, [, s]) => sum + bytes(s), bytes(handle));
    const victims = [];
    for (const [other, session] of held) {
      if (fits(count, total)) break;
      if (step.ids.has(other)) continue;
      victims.push(other);
      count--;
      total -= bytes(session);
    }
    if (!fits(count, total) || (victims.length > 0 && step.evicting)) {
      if (step.ids.size === 0) throw new LayerfoldError('internal', `session "${id}" alone does not fit the node's limits`);
      return null;
    }
    step.evicting ||= victims.length > 0;
    step.fresh.push([id, handle]);
    return victims;
  }

  /** Marks the step's sessions, [{call, handle, fresh}], running until stepEnded(). */
  stepStarted(entries) {
    for (const { call, handle, fresh } of entries) {
      this.#running.set(handle, call.startPos);
      if (fresh) this.#pending.set(call.session, handle);
    }
  }

  /** The step is done with its sessions: those dropped while it ran are freed. */
  stepEnded() {
    this.#running.clear();
    for (const handle of this.#dropAfterStep.splice(0)) this.#lf.fn.lf_session_free(handle);
  }

  /**
   * What a call's outcome does to the sessions, once its step is done: a forward that succeeded
   * makes its session the most recently used (a new one registered, the sessions it displaces,
   * victims, evicted); a refused one changes nothing, and its new session is freed.
   */
  settle(id, { handle, fresh, victims }, succeeded) {
    if (fresh) {
      // Dropped while the step ran: drop() has freed it.
      if (this.#pending.get(id) !== handle) return;
      this.#pending.delete(id);
      if (!succeeded) {
        this.#lf.fn.lf_session_free(handle);
        return;
      }
      for (const victim of victims) {
        if (!this.drop(victim)) continue;
        this.#evicted.add(victim);
        if (this.#evicted.size > EVICTED_REMEMBERED) this.#evicted.delete(this.#evicted.values().next().value);
      }
      this.#evicted.delete(id);
    } else if (!succeeded || this.#held.get(id) !== handle) {
      return;
    }
    this.#held.delete(id);
    this.#held.set(id, handle);
  }

  /**
   * The session's handle for a read of what its last forward left (undefined when unknown),
   * which the engine's threads are rewriting while a step runs it: the caller is told to read
   * once its forward has resolved.
   */
  idle(id, what) {
    const session = this.#held.get(id);
    if (this.#running.has(session)) {
      throw new LayerfoldError('failed_precondition', `${what}("${id}"): a forward of this session is running; read it once that forward has resolved`);
    }
    return session;
  }

  // The held session for a call between steps (truncate, checkpoint).
  #between(id, what) {
    if (!this.#model.ptr) throw closedError(what);
    const session = this.#held.get(id);
    if (session === undefined) {
      if (this.#evicted.has(id)) throw new LayerfoldError('evicted', `${what}: session "${id}" was evicted (least recently used): start it again from position 0`);
      throw new LayerfoldError('unknown_session', `${what}: session "${id}" is unknown to this node`);
    }
    return session;
  }

  /**
   * Cuts the held session to nPast positions, or back to its latest checkpoint before them, between
   * steps (LayerNode.truncate). -> the positions it then holds
   */
  truncate(id, nPast) {
    return truncateSession(this.#lf, this.#between(id, 'truncate'), nPast);
  }

  /** Keeps a checkpoint of the held session at its length, at most `keep` (LayerNode.checkpoint). -> its length */
  checkpoint(id, keep) {
    return checkpointSession(this.#lf, this.#between(id, 'checkpoint'), keep);
  }

  /** Positions the session holds (null when unknown); while it runs, those held before the step. */
  length(id) {
    const session = this.#held.get(id) ?? this.#pending.get(id);
    if (session === undefined) return null;
    return this.#running.get(session) ?? this.#lf.fn.lf_session_n_past(session);
  }

  /** Bytes of the session's KV cache (0 when unknown). */
  bytes(id) {
    const session = this.#held.get(id);
    return session === undefined ? 0 : this.#lf.fn.lf_session_bytes(session);
  }

  /** The ids held, least recently used first. */
  ids() {
    return [...this.#held.keys()];
  }

  /** Forgets the session (false when unknown); one the running step uses is freed after it. */
  drop(id) {
    const session = this.#held.get(id) ?? this.#pending.get(id);
    if (session === undefined) return false;
    this.#held.delete(id);
    this.#pending.delete(id);
    if (this.#running.has(session)) this.#dropAfterStep.push(session);
    else this.#lf.fn.lf_session_free(session);
    return true;
  }

  /** Drops every session, held or registering. */
  dropAll() {
    for (const id of [...this.#held.keys(), ...this.#pending.keys()]) this.drop(id);
  }
}
