// A member's side of the group protocol (protocol/member_frames.js, docs/tensor-parallel.md),
// whatever carries the frames: a Node WebSocket server (server/member_host.js) or a Workers-style
// isolate (edge/worker.js). One call at a time: the leader connection that began it owns it until
// its end, and one that goes away mid-call has it abandoned, its session as it was. With a
// PeerExchange (group/peer_exchange.js) a call may run member to member: the leader's begin says
// so, and the member exchanges its pieces with the others itself, answering the leader once at
// the end. The other members' links to it come in here as connections whose first frame is a
// hello. A member holding the model's ends also embeds tokens and gives logits of its rows.
import { decodeFrame, encodeFrame, isCount, kvRowsArrays, kvRowsIn } from '../protocol/member_frames.js';
import { LayerfoldError } from '../wasm/capi.js';
import { kvLayoutToWire } from './kv_heads.js';

const MAX_SESSION_ID = 256;
const DEFAULT_PHASE_DEADLINE_MS = 30_000;

export class MemberService {
  #member;
  #peers;
  #links = new Map();  // a connection another member dialed -> its member index
  #owner = null;  // the connection whose call is under way
  #amongMembers = false;  // whether that call exchanges member to member
  #leaderGone = false;    // its leader went away: it unwinds at its next wait
  #draining = false;
  #callEnded = () => {};  // resolves drained()'s wait when the call under way ends
  #log;

  /**
   * member: a LocalMember; peers: its PeerExchange, where it can exchange member to member.
   * @example const service = new MemberService(member, { log });
   */
  constructor(member, { log = () => {}, peers = null } = {}) {
    this.#member = member;
    this.#peers = peers;
    this.#log = log;
  }

  /** Whether a call is under way. */
  get busy() {
    return this.#owner !== null;
  }

  /**
   * The answer frame to one frame from `connection` (any object naming a leader's connection, or
   * another member's link); refusals are `error` frames, never throws. A frame on a member's
   * link has no answer: null.
   * @example const reply = await service.answer(socket, bytes, true); if (reply) socket.send(reply);
   */
  async answer(connection, bytes, isBinary) {
    const peer = this.#links.get(connection);
    try {
      if (!isBinary) throw new LayerfoldError('bad_frame', 'a text frame');
      const { header, payload } = decodeFrame(bytes, peer === undefined ? 'the leader' : `member ${peer}`);
      if (peer !== undefined) {
        this.#peers.received(peer, header, payload);
        return null;
      }
      return await this.#run(connection, header, payload);
    } catch (error) {
      return encodeFrame({ op: 'error', code: error.code ?? 'internal', message: error.message });
    } finally {
      if (this.#owner === null) this.#callEnded();
    }
  }

  /**
   * `connection` is gone: its call, if under way, is abandoned; a member's link: a call waiting
   * for that member's piece fails naming it.
   */
  disconnected(connection) {
    const peer = this.#links.get(connection);
    if (peer !== undefined) {
      this.#links.delete(connection);
      this.#peers.gone(peer);
      return;
    }
    if (this.#owner !== connection) return;
    if (this.#amongMembers) {
      // The call unwinds where it waits (or after the step it is in), telling the others.
      this.#leaderGone = true;
      this.#peers.abort(new LayerfoldError('aborted', `member ${this.#member.index}: the leader went away mid-call`));
      return;
    }
    this.#owner = null;
    this.#member.abandon();
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
        n_vocab: member.nVocab, n_embd_per_layer: member.nEmbdPerLayer, weight_bytes: member.weightBytes, memory_bytes: member.memoryBytes(),
        max_tokens: Number.isFinite(member.maxTokens) ? member.maxTokens : null, cache_type_k: member.cacheTypeK, cache_type_v: member.cacheTypeV,
        member_exchange: this.#peers !== null, vocab: member.vocab, embedding: member.holdsEmbedding === true, head: member.holdsHead === true,
        kv_rows_in: kvLayoutToWire(member.kvLayout.in), kv_rows_out: kvLayoutToWire(member.kvLayout.out) });
    }
    if (op === 'embed' || op === 'logits') return this.#runEnd(op, header, payload);
    if (op === 'hello' || op === 'peers') {
      if (!this.#peers) throw new LayerfoldError('unimplemented', `member ${index} exchanges through its leader only`);
      if (op === 'hello') {
        this.#links.set(connection, this.#peers.checkHello(header));
        return encodeFrame({ op: 'ok' });
      }
      if (this.#owner && this.#owner !== connection) throw new LayerfoldError('unavailable', `member ${index} is running another leader's call`);
      await this.#peers.connect(header.urls, deadline(header));
      return encodeFrame({ op: 'ok' });
    }
    if (op === 'begin') {
      if (this.#draining) throw new LayerfoldError('unavailable', `member ${index} is shutting down`);
      if (this.#owner && this.#owner !== connection) throw new LayerfoldError('unavailable', `member ${index} is running another leader's call`);
      const { session, startPos, rows, perLayer } = header;
      checkSession(session);
      const floats = rows * member.nEmbd + perLayer;
      if (!isCount(startPos) || !isCount(rows) || rows === 0 || !isCount(perLayer) || payload.length < floats) {
        throw new LayerfoldError('invalid_argument', `a begin of ${payload.length} floats does not hold rows ${rows} of ${member.nEmbd} and ${perLayer} per-layer inputs`);
      }
      const call = {
        session, startPos, hidden: payload.subarray(0, rows * member.nEmbd), perLayer: perLayer ? payload.subarray(rows * member.nEmbd, floats) : null,
        kvRows: kvRowsIn(header, payload, floats, 'the leader'),
      };
      if (header.exchange === 'members') return this.#runAmongMembers(connection, header, call);
      this.#owner = connection;
      const piece = await member.begin(call).catch((error) => { this.#owner = null; throw error; });
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
        return outputFrame('output', next);
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

  // The model's ends (LocalMember.embed, logits): `embed` of header.tokens, all of the member's
  // vocabulary rows -> `embedded` [hidden, per-layer inputs]; `logits` of hidden [rows, n_embd]
  // -> `logits` of its rows.
  #runEnd(op, header, payload) {
    const member = this.#member;
    const holds = op === 'embed' ? member.holdsEmbedding : member.holdsHead;
    if (!holds) {
      throw new LayerfoldError('failed_precondition', `member ${member.index} holds no ${op === 'embed' ? 'embedding' : 'head'}: serve it with --ends at the pipeline's end`);
    }
    const [first, end] = member.vocab;
    const most = Number.isFinite(member.maxTokens) ? member.maxTokens : Infinity;
    if (op === 'embed') {
      const { tokens } = header;
      if (!Array.isArray(tokens) || tokens.length === 0 || tokens.length > most || !tokens.every((t) => Number.isInteger(t) && t >= first && t < end)) {
        throw new LayerfoldError('invalid_argument', `an embed needs 1 to ${most} token ids of member ${member.index}'s rows [${first}, ${end})`);
      }
      const { hidden, perLayer } = member.embed(tokens);
      return encodeFrame({ op: 'embedded', rows: tokens.length }, perLayer ? [hidden, perLayer] : [hidden]);
    }
    const rows = payload.length / member.nEmbd;
    if (!isCount(header.rows) || header.rows === 0 || header.rows !== rows || rows > most) {
      throw new LayerfoldError('invalid_argument', `a logits of ${payload.length} floats does not hold rows ${header.rows} (at most ${most}) of ${member.nEmbd}`);
    }
    return encodeFrame({ op: 'logits', rows }, [member.logits(payload)]);
  }

  // A whole call, its pieces exchanged with the other members directly: member 0 answers the
  // output, the others `done`. A failure here is told to the others, which stop waiting for
  // this member, and every member abandons the call.
  async #runAmongMembers(connection, header, call) {
    const member = this.#member;
    const peers = this.#peers;
    if (!peers) throw new LayerfoldError('unimplemented', `member ${member.index} exchanges through its leader only`);
    const deadlineMs = deadline(header);
    this.#owner = connection;
    this.#amongMembers = true;
    try {
      peers.begin(header.call);
      await peers.ready(deadlineMs);
      let piece = await member.begin(call);
      for (let phase = 0; ; ++phase) {
        if (this.#leaderGone) throw new LayerfoldError('aborted', `member ${member.index}: the leader went away mid-call`);
        const next = await member.exchange(await peers.gather(phase, piece, deadlineMs, this.#phaseName(phase)));
        if (next.output) return outputFrame(member.index === 0 ? 'output' : 'done', next);
        piece = next.piece;
      }
    } catch (error) {
      peers.fail(error);
      member.abandon();
      if (this.#leaderGone) this.#log('WARNING', 'the leader went away mid-call: abandoned');
      throw error;
    } finally {
      peers.end();
      this.#owner = null;
      this.#amongMembers = false;
      this.#leaderGone = false;
    }
  }

  // "layer L's <phase>" of a call's phase number (four a layer, from the range's first).
  #phaseName(phase) {
    const layer = this.#member.layers[0] + Math.floor(phase / 4);
    return `layer ${layer}'s ${['attention', 'attn_output', 'ffn', 'ffn_down'][phase % 4]}`;
  }
}

// A call's end: its output (but for `done`, the answer of a member other than 0 among members)
// and the member's K/V rows of the sources whose readers follow the group.
function outputFrame(op, { output, kvRows }) {
  const kv = kvRowsArrays(kvRows);
  return encodeFrame({ op, kv_rows: kv.header }, [...(op === 'done' ? [] : [output]), ...kv.arrays]);
}

// The leader's deadline for one phase (deadlineMs), or the default.
function deadline(header) {
  const ms = header.deadlineMs;
  return Number.isSafeInteger(ms) && ms > 0 ? ms : DEFAULT_PHASE_DEADLINE_MS;
}

function checkSession(session) {
  if (typeof session !== 'string' || session.length === 0 || session.length > MAX_SESSION_ID) {
    throw new LayerfoldError('invalid_argument', `a session id must be a string of 1 to ${MAX_SESSION_ID} characters`);
  }
}
