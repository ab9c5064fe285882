// A member of a tensor-parallel group served by another process (server/member_host.js), reached
// over one WebSocket: LocalMember's shape, each call one frame out and one frame back
// (protocol/member_frames.js). A member that does not answer a phase within the deadline fails
// the call naming it, and its connection is closed: the member then abandons the call, so no
// cache keeps half of it. An answer is held to what the leader asked (a piece, an output of the
// call's rows, finite values) before anyone uses it.
import { redactUrl } from '../log/redact.js';
import { CACHE_TYPES } from '../protocol/kv_rows.js';
import { decodeFrame, encodeFrame, isCount, kvRowsArrays, kvRowsIn, MEMBER_PATH } from '../protocol/member_frames.js';
import { LayerfoldError } from '../wasm/capi.js';
import { checkKvRows, kvLayoutFromInfo } from './kv_heads.js';
import { dialWs } from './ws_link.js';

export const DEFAULT_DEADLINE_MS = 30_000;

// The member's WebSocket address at `url` (http(s):// or ws(s)://, its path replaced).
function socketUrl(url) {
  const u = new URL(url);
  if (u.protocol === 'http:') u.protocol = 'ws:';
  if (u.protocol === 'https:') u.protocol = 'wss:';
  if (u.protocol !== 'ws:' && u.protocol !== 'wss:') throw new LayerfoldError('invalid_argument', `member URL ${redactUrl(url)}: expected http(s):// or ws(s)://`);
  u.pathname = MEMBER_PATH;
  return u.toString();
}

export class RemoteMember {
  #link;
  #deadlineMs;
  #pending = null;  // {resolve, reject, timer} of the frame awaited
  #rows = 0;        // the call's rows
  #closedError = null;

  constructor(link, { url, index, deadlineMs }) {
    this.#link = link;
    this.url = redactUrl(url);
    this.index = index;
    this.#deadlineMs = deadlineMs;
    this.name = `member ${index} (${this.url})`;
    link.onmessage = (bytes, isBinary) => this.#received(bytes, isBinary);
    link.onclose = () => this.#fail(new LayerfoldError('unavailable', `${this.name} closed the connection`));
  }

  /**
   * Connects to the member server at `url` and checks it is member `index` of `members`.
   * @example const m = await RemoteMember.connect('http://a:8080', { index: 0, members: 2, authToken });
   */
  static async connect(url, { index, members, authToken, deadlineMs = DEFAULT_DEADLINE_MS }) {
    const link = await dialWs(socketUrl(url), { authToken, deadlineMs }).catch((error) => {
      throw error.status
        ? new LayerfoldError(error.status === 401 ? 'unauthenticated' : 'unavailable', `member ${index} (${redactUrl(url)}) refused the connection: HTTP ${error.status}`)
        : new LayerfoldError('unavailable', `member ${index} (${redactUrl(url)}): ${error.message}`);
    });
    const member = new RemoteMember(link, { url, index, deadlineMs });
    try {
      const { header } = await member.#request({ op: 'info' });
      const { layers, n_embd: nEmbd, n_layer: nLayer, n_vocab: nVocab } = header;
      if (header.index !== index || header.members !== members) {
        throw new LayerfoldError('invalid_argument', `${member.name} is member ${header.index} of ${header.members}, not ${index} of ${members}`);
      }
      if (!Array.isArray(layers) || layers.length !== 2 || ![...layers, nEmbd, nLayer, nVocab].every(isCount) || nEmbd === 0) {
        throw new LayerfoldError('bad_response', `${member.name}: its info lacks its layers and the model's sizes`);
      }
      const maxTokens = header.max_tokens ?? Infinity;
      if (maxTokens !== Infinity && !(isCount(maxTokens) && maxTokens > 0)) {
        throw new LayerfoldError('bad_response', `${member.name}: a max_tokens that is not a positive count`);
      }
      const { cache_type_k: cacheTypeK, cache_type_v: cacheTypeV } = header;
      if (!CACHE_TYPES.includes(cacheTypeK) || !CACHE_TYPES.includes(cacheTypeV)) {
        throw new LayerfoldError('bad_response', `${member.name}: its info names no cache types (cache_type_k, cache_type_v: ${CACHE_TYPES.join(', ')})`);
      }
      const nEmbdPerLayer = header.n_embd_per_layer ?? 0;
      if (!isCount(nEmbdPerLayer)) throw new LayerfoldError('bad_response', `${member.name}: an n_embd_per_layer that is not a count`);
      const vocab = header.vocab ?? null;
      if (vocab !== null && !(Array.isArray(vocab) && vocab.length === 2 && vocab.every(isCount) && vocab[0] < vocab[1] && vocab[1] <= nVocab)) {
        throw new LayerfoldError('bad_response', `${member.name}: its info's vocab is not rows [begin, end) of the ${nVocab} tokens`);
      }
      member.kvLayout = { in: kvLayoutFromInfo(header.kv_rows_in, member.name), out: kvLayoutFromInfo(header.kv_rows_out, member.name) };
      Object.assign(member, { members, layers, nEmbd, nLayer, nVocab, nEmbdPerLayer, weightBytes: header.weight_bytes, maxTokens, cacheTypeK, cacheTypeV,
        memberExchange: header.member_exchange === true, vocab,
        holdsEmbedding: vocab !== null && header.embedding === true, holdsHead: vocab !== null && header.head === true });
      return member;
    } catch (error) {
      member.close();
      throw error;
    }
  }

  /** Whether the connection is gone (closed by either end, or cut for a missed deadline). */
  get closed() {
    return this.#closedError !== null;
  }

  /** LocalMember.begin's over the wire. */
  async begin({ session, startPos, hidden, perLayer = null, kvRows = null }) {
    this.#rows = hidden.length / this.nEmbd;
    const values = perLayer ?? new Float32Array(0);
    const kv = kvRowsArrays(kvRows ?? {});
    return this.#piece(await this.#request({ op: 'begin', session, startPos, rows: this.#rows, perLayer: values.length, kv_rows: kv.header },
      [hidden, values, ...kv.arrays]));
  }

  /** LocalMember.exchange's over the wire. */
  async exchange(pieces) {
    const answer = await this.#request({ op: 'exchange', floats: pieces.map((p) => p.length) }, pieces);
    if (answer.header.op === 'output') return this.#end(answer, this.#rows, true);
    return { piece: this.#piece(answer) };
  }

  /**
   * Has the member link itself to every member at `urls` (the group's, in member order), for
   * calls exchanged member to member; each phase of those may take the member deadlineMs.
   */
  async linkPeers(urls) {
    const { header } = await this.#request({ op: 'peers', urls, deadlineMs: this.#deadlineMs });
    if (header.op !== 'ok') throw new LayerfoldError('bad_response', `${this.name}: answered ${JSON.stringify(header.op)} to its peers`);
  }

  /**
   * A whole call exchanged member to member (after linkPeers), under the leader's id `call` for
   * it: member 0's answer is the output [rows, n_embd], the others' null. The member has the
   * deadline for each of the call's `phases`.
   */
  async runAmongMembers({ session, startPos, hidden, perLayer = null, kvRows = null }, { call, phases }) {
    const rows = hidden.length / this.nEmbd;
    const values = perLayer ?? new Float32Array(0);
    const kv = kvRowsArrays(kvRows ?? {});
    const answer = await this.#request({ op: 'begin', exchange: 'members', call, deadlineMs: this.#deadlineMs, session, startPos, rows, perLayer: values.length,
      kv_rows: kv.header }, [hidden, values, ...kv.arrays], this.#deadlineMs * (phases + 1));
    const due = this.index === 0 ? 'output' : 'done';
    if (answer.header.op !== due) throw new LayerfoldError('bad_response', `${this.name}: answered ${JSON.stringify(answer.header.op)} where ${due} was due`);
    return this.#end(answer, rows, this.index === 0);
  }

  // A call's end ({output} of rows, where withOutput, and {kvRows} of kvLayout.out), checked.
  #end({ header, payload }, rows, withOutput) {
    const floats = withOutput ? rows * this.nEmbd : 0;
    if (payload.length < floats) {
      throw new LayerfoldError('bad_response', `${this.name}: an output of ${payload.length} floats for ${rows} rows of ${this.nEmbd}`);
    }
    const kvRows = checkKvRows(kvRowsIn(header, payload, floats, this.name), this.kvLayout.out, rows, this, this.name);
    return { output: withOutput ? checkFinite(payload.subarray(0, floats), `${this.name}'s output`) : null, kvRows };
  }

  /** LocalMember.embed's over the wire. */
  async embed(tokens) {
    const nPerLayer = this.nLayer * this.nEmbdPerLayer;
    const { header, payload } = await this.#request({ op: 'embed', tokens: Array.from(tokens) });
    const n = tokens.length;
    if (header.op !== 'embedded' || payload.length !== n * (this.nEmbd + nPerLayer)) {
      throw new LayerfoldError('bad_response', `${this.name}: ${JSON.stringify(header.op)} of ${payload.length} floats where the embedding of ${n} tokens was due`);
    }
    checkFinite(payload, `${this.name}'s embedding`);
    return { hidden: payload.subarray(0, n * this.nEmbd), perLayer: nPerLayer > 0 ? payload.subarray(n * this.nEmbd) : null };
  }

  /** LocalMember.logits's over the wire. */
  async logits(hidden) {
    const rows = hidden.length / this.nEmbd;
    const { header, payload } = await this.#request({ op: 'logits', rows }, [hidden]);
    if (header.op !== 'logits' || payload.length !== rows * (this.vocab[1] - this.vocab[0])) {
      throw new LayerfoldError('bad_response', `${this.name}: ${JSON.stringify(header.op)} of ${payload.length} floats where the logits of ${rows} rows of its vocabulary rows [${this.vocab.join(', ')}) were due`);
    }
    return checkFinite(payload, `${this.name}'s logits`);
  }

  /** Ends the call under way on the member (its session as it was); never throws. */
  async abandon() {
    if (this.#closedError) return;
    await this.#request({ op: 'abandon' }).catch(() => {});
  }

  async sessionLength(session) {
    return this.#length(await this.#request({ op: 'length', session }));
  }

  /** LocalMember.truncate's over the wire. */
  async truncate(session, nPast) {
    return this.#length(await this.#request({ op: 'truncate', session, nPast }));
  }

  /** LocalMember.checkpoint's over the wire. */
  async checkpoint(session, keep) {
    return this.#length(await this.#request({ op: 'checkpoint', session, keep }));
  }

  async dropSession(session) {
    await this.#request({ op: 'drop', session });
  }

  close() {
    this.#fail(new LayerfoldError('unavailable', `${this.name}: the group was closed`));
    this.#link.close();
  }

  // A length answer's positions.
  #length({ header }) {
    if (header.op !== 'length' || !isCount(header.n_past)) throw new LayerfoldError('bad_response', `${this.name}: a session length that is not a count`);
    return header.n_past;
  }

  // A piece answer's floats; its size is held by every member it goes to (lf_member_put_piece).
  #piece({ header, payload }) {
    if (header.op !== 'piece') throw new LayerfoldError('bad_response', `${this.name}: answered ${JSON.stringify(header.op)} where a piece was due`);
    return checkFinite(payload, `${this.name}'s piece`);
  }

  // Sends one frame and awaits the member's one answer, within deadlineMs.
  #request(header, arrays = [], deadlineMs = this.#deadlineMs) {
    if (this.#closedError) return Promise.reject(this.#closedError);
    if (this.#pending) return Promise.reject(new LayerfoldError('internal', `${this.name}: a request while another is under way`));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#fail(new LayerfoldError('deadline_exceeded', `${this.name} did not answer ${header.op} within ${deadlineMs} ms`));
        this.#link.close();
      }, deadlineMs);
      this.#pending = { resolve, reject, timer };
      this.#link.send(encodeFrame(header, arrays));
    });
  }

  #received(bytes, isBinary) {
    const pending = this.#pending;
    if (!pending) {
      this.#fail(new LayerfoldError('bad_response', `${this.name} sent a frame nobody asked for`));
      this.#link.close();
      return;
    }
    this.#pending = null;
    clearTimeout(pending.timer);
    try {
      if (!isBinary) throw new LayerfoldError('bad_frame', `${this.name}: a text frame`);
      const frame = decodeFrame(bytes, this.name);
      if (frame.header.op === 'error') {
        pending.reject(new LayerfoldError(String(frame.header.code ?? 'internal'), `${this.name}: ${String(frame.header.message ?? 'failed')}`));
      } else {
        pending.resolve(frame);
      }
    } catch (error) {
      pending.reject(error);
    }
  }

  #fail(error) {
    this.#closedError ??= error;
    const pending = this.#pending;
    this.#pending = null;
    if (pending) {
      clearTimeout(pending.timer);
      pending.reject(error);
    }
  }
}

function checkFinite(floats, what) {
  for (let i = 0; i < floats.length; ++i) {
    if (!Number.isFinite(floats[i])) throw new LayerfoldError('bad_response', `${what} holds a non-finite value at ${i}`);
  }
  return floats;
}
