// A member's side of the group protocol (protocol/member_frames.js, docs/tensor-parallel.md),
// whatever carries the frames: a Node WebSocket server (server/member_host.js) or a Workers-style
// isolate (edge/worker.js). One call at a time: the leader connection that began it owns it until
// its end, and one that goes away mid-call has it abandoned, its session as it was.
import { decodeFrame, encodeFrame, isCount } from '../protocol/member_frames.js';
import { LayerfoldError } from '../wasm/capi.js';

const MAX_SESSION_ID = 256;

export class MemberService {
  #member;
  #owner = null;  // the connection whose call is under way
  #draining = false;
  #callEnded = () => {};  // resolves drained()'s wait when the call under way ends
  #log;

  /**
   * member: a LocalMember.
   * @example const service = new MemberService(member, { log });
   */
  constructor(member, { log = () => {} } = {}) {
    this.#member = member;
    this.#log = log;
  }

  /** Whether a call is under way. */
  get busy() {
    return this.#owner !== null;
  }

  /**
   * The answer frame to one frame from `connection` (any object naming a leader's connection);
   * refusals are `error` frames, never throws.
   * @example socket.send(await service.answer(socket, bytes, true));
   */
  async answer(connection, bytes, isBinary) {
    try {
      if (!isBinary) throw new LayerfoldError('bad_frame', 'a text frame');
      const { header, payload } = decodeFrame(bytes, 'the leader');
      return await this.#run(connection, header, payload);
    } catch (error) {
      return encodeFrame({ op: 'error', code: error.code ?? 'internal', message: error.message });
    } finally {
      if (this.#owner === null) this.#callEnded();
    }
  }

  /** `connection` is gone: its call, if under way, is abandoned. */
  disconnected(connection) {
    if (this.#owner !== connection) return;
    this.#member.abandon();
    this.#owner = null;
    this.#callEnded();
    this.#log('WARNING', 'the leader went away mid-call: abandoned');
  }

  /**
   * Takes no new call; resolves once the call under way (if any) has ended or timeoutMs passed,
   * with the number of calls still under way (0 or 1).
   */
  async drain(timeoutMs) {
    this.#draining = true;
    if (this.#owner) {
      let timer;
      await Promise.race([
        new Promise((resolve) => { this.#callEnded = resolve; }),
        new Promise((resolve) => { timer = setTimeout(resolve, timeoutMs); }),
      ]);
      clearTimeout(timer);
    }
    return this.#owner ? 1 : 0;
  }

  async #run(connection, header, payload) {
    const member = this.#member;
    const { op } = header;
    const { index, members } = member;
    if (op === 'info') {
      return encodeFrame({ op: 'info', index, members, layers: member.layers, n_embd: member.nEmbd, n_layer: member.nLayer,
        n_vocab: member.nVocab, weight_bytes: member.weightBytes, memory_bytes: member.memoryBytes(),
        max_tokens: Number.isFinite(member.maxTokens) ? member.maxTokens : null, cache_type_k: member.cacheTypeK, cache_type_v: member.cacheTypeV });
    }
    if (op === 'begin') {
      if (this.#draining) throw new LayerfoldError('unavailable', `member ${index} is shutting down`);
      if (this.#owner && this.#owner !== connection) throw new LayerfoldError('unavailable', `member ${index} is running another leader's call`);
      const { session, startPos, rows, perLayer } = header;
      checkSession(session);
      if (!isCount(startPos) || !isCount(rows) || rows === 0 || !isCount(perLayer) || payload.length !== rows * member.nEmbd + perLayer) {
        throw new LayerfoldError('invalid_argument', `a begin of ${payload.length} floats does not hold rows ${rows} of ${member.nEmbd} and ${perLayer} per-layer inputs`);
      }
      this.#owner = connection;
      const hidden = payload.subarray(0, rows * member.nEmbd);
      const piece = await member.begin({ session, startPos, hidden, perLayer: perLayer ? payload.subarray(rows * member.nEmbd) : null })
        .catch((error) => { this.#owner = null; throw error; });
      return encodeFrame({ op: 'piece' }, [piece]);
    }
    if (op === 'exchange') {
      if (this.#owner !== connection) throw new LayerfoldError('failed_precondition', 'no call of this leader is under way');
      const floats = header.floats;
      if (!Array.isArray(floats) || floats.length !== members || !floats.every(isCount) || floats.reduce((a, b) => a + b, 0) !== payload.length) {
        throw new LayerfoldError('invalid_argument', `an exchange of ${payload.length} floats does not hold ${members} pieces as stated`);
      }
      let at = 0;
      const pieces = floats.map((n) => payload.subarray(at, (at += n)));
      const next = await member.exchange(pieces).catch((error) => { this.#owner = null; throw error; });
      if (next.output) {
        this.#owner = null;
        return encodeFrame({ op: 'output' }, [next.output]);
      }
      return encodeFrame({ op: 'piece' }, [next.piece]);
    }
    if (op === 'abandon') {
      if (this.#owner === connection) {
        member.abandon();
        this.#owner = null;
      }
      return encodeFrame({ op: 'ok' });
    }
    if (op === 'length' || op === 'drop' || op === 'truncate' || op === 'checkpoint') {
      checkSession(header.session);
      if (op === 'length') return encodeFrame({ op: 'length', n_past: member.sessionLength(header.session) });
      if (this.#owner) throw new LayerfoldError('unavailable', `member ${index} is running a call: ${op} after it`);
      if (op === 'truncate') {
        if (!isCount(header.nPast)) throw new LayerfoldError('invalid_argument', 'a truncate needs nPast, a count of positions');
        return encodeFrame({ op: 'length', n_past: member.truncate(header.session, header.nPast) });
      }
      if (op === 'checkpoint') {
        if (!isCount(header.keep) || header.keep < 1) throw new LayerfoldError('invalid_argument', 'a checkpoint needs keep, a count of at least 1');
        return encodeFrame({ op: 'length', n_past: member.checkpoint(header.session, header.keep) });
      }
      member.dropSession(header.session);
      return encodeFrame({ op: 'ok' });
    }
    throw new LayerfoldError('invalid_argument', `unknown op ${JSON.stringify(op)}`);
  }
}

function checkSession(session) {
  if (typeof session !== 'string' || session.length === 0 || session.length > MAX_SESSION_ID) {
    throw new LayerfoldError('invalid_argument', `a session id must be a string of 1 to ${MAX_SESSION_ID} characters`);
  }
}
