// A tensor-parallel group's leader (docs/tensor-parallel.md): S members serve layers [begin, end)
// together, each holding a slice of every layer. The leader runs a call phase by phase: every
// member's piece goes to every member at each exchange, and each goes on from the whole vector.
// Members are in modules of this process (local_member.js) or in other processes, reached over a
// WebSocket (remote_member.js); either way the output is a single node's bytes for any S. Member
// servers can instead exchange their pieces among themselves (peer_exchange.js): the leader then
// starts a call and takes its output, one round trip a call.
import { cutRefusal, DEFAULT_CHECKPOINTS, keepRefusal } from '../protocol/checkpoints.js';
import { openSource } from '../sources/open_source.js';
import { LayerfoldError } from '../wasm/capi.js';
import { threadsAvailable } from '../wasm/load_node.js';
import { headsOf, placeHeads } from './kv_heads.js';
import { openLocalMember } from './open_local_member.js';
import { RemoteMember } from './remote_member.js';

export class MemberGroup {
  #members;
  #reconnect;  // member index -> a new connection to it (remote members)
  #queue = Promise.resolve();  // the group's calls, one at a time, in call order
  #urls;       // remote members' URLs, for their links to each other
  #calls = 0;  // calls exchanged member to member so far
  #handedOut = new WeakMap();  // forward()'s output -> the K/V rows it handed out
  #callPrefix = Array.from(crypto.getRandomValues(new Uint8Array(6)), (b) => b.toString(16).padStart(2, '0')).join('');

  constructor(members, { reconnect = null, urls = null, exchange = 'leader' } = {}) {
    this.#members = members;
    this.#reconnect = reconnect;
    this.#urls = urls;
    this.exchange = exchange;
    const [first] = members;
    Object.assign(this, { layers: first.layers, nEmbd: first.nEmbd, nLayer: first.nLayer, nVocab: first.nVocab });
    this.weightBytes = members.map((m) => m.weightBytes);
    this.names = members.map((m) => m.name ?? `member ${m.index} (local)`);
    /** Whether the members hold the model's token embedding / its head, vocabulary-parallel. */
    this.holdsEmbedding = members.every((m) => m.holdsEmbedding === true);
    this.holdsHead = members.every((m) => m.holdsHead === true);
  }

  /**
   * A group of `members` members of layers [begin, end) of `model` (a path or URL, as LayerNode's),
   * each in a module of its own: 'threaded' with `threads` engine threads, or 'single'. With
   * memoryBudgetBytes each member is counted against it before loading, for calls of maxTokens
   * rows (LocalMember.open); cacheTypeK / cacheTypeV: the members' cache types ('f16' default,
   * 'q8_0', 'q4_0'); ends: the members hold the model's ends the layers touch, each a slice of
   * the vocabulary (embed(), logits()).
   * @param {{model: string, layers: [number, number], members: number, build?: 'threaded'|'single',
   *          threads?: number, maxContext?: number, memoryBudgetBytes?: number, maxTokens?: number, cacheDir?: string,
   *          cacheTypeK?: string, cacheTypeV?: string, ends?: boolean}} options
   * @example const group = await MemberGroup.open({ model: 'tiny.gguf', layers: [0, 2], members: 2 });
   */
  static async open({ model, layers, members: n, build, threads = 1, maxContext = 0, memoryBudgetBytes, maxTokens, cacheDir, cacheTypeK, cacheTypeV,
    ends = false }) {
    checkMemberCount(n);
    const threaded = build ? build === 'threaded' : threadsAvailable();
    const source = await openSource(model, { cacheDir });
    const members = [];
    try {
      for (let index = 0; index < n; ++index) {
        members.push(await openLocalMember({ source, header: members[0]?.header, index, members: n, layers, threaded, threads, maxContext,
          memoryBudgetBytes, maxTokens, cacheTypeK, cacheTypeV, ends }));
      }
      return new MemberGroup(members);
    } catch (error) {
      for (const m of members) m.close();
      throw error;
    } finally {
      await source.close();
    }
  }

  /**
   * The group of the members serving at `urls` (ws:// or http:// of each member's server, in
   * member order): each must say it is that member of a group of urls.length serving the same
   * layers with the same cache types, or the group is refused naming it. authToken: the members'
   * bearer token; deadlineMs: how long a member may take over one phase before the call fails
   * naming it. exchange: 'members' (each member sends its pieces to the others itself, over
   * links it dials to these URLs with its own token), 'leader' (every piece through this
   * process), or 'auto': 'members' where every member can and they reach each other at these
   * URLs, else 'leader' (group.exchange says which; group.linkFailure why not member to member,
   * when they could not link).
   * @example const group = await MemberGroup.connect(['http://a:8080', 'http://b:8080'], { authToken });
   */
  static async connect(urls, { authToken, deadlineMs, exchange = 'auto' } = {}) {
    checkMemberCount(urls.length);
    if (!['auto', 'members', 'leader'].includes(exchange)) {
      throw new LayerfoldError('invalid_argument', `exchange must be auto, members or leader, not ${JSON.stringify(exchange)}`);
    }
    const connect = (index) => RemoteMember.connect(urls[index], { index, members: urls.length, authToken, deadlineMs });
    const settled = await Promise.allSettled(urls.map((_, index) => connect(index)));
    const failed = settled.find((s) => s.status === 'rejected');
    if (failed) {
      for (const s of settled) if (s.status === 'fulfilled') s.value.close();
      throw failed.reason;
    }
    const members = settled.map((s) => s.value);
    const [first] = members;
    const other = members.find((m) => m.layers[0] !== first.layers[0] || m.layers[1] !== first.layers[1] || m.nEmbd !== first.nEmbd ||
      m.cacheTypeK !== first.cacheTypeK || m.cacheTypeV !== first.cacheTypeV || (m.vocab === null) !== (first.vocab === null));
    if (other) {
      for (const m of members) m.close();
      const what = (m) => `layers ${m.layers.join('-')} of width ${m.nEmbd} with a ${m.cacheTypeK}/${m.cacheTypeV} cache${m.vocab ? ' and its ends' : ''}`;
      throw new LayerfoldError('invalid_argument', `member ${other.index} (${other.url}) serves ${what(other)}, member 0 ${what(first)}: not one group`);
    }
    const gap = first.vocab && members.find((m, i) => m.vocab[0] !== (i === 0 ? 0 : members[i - 1].vocab[1]) || (i === members.length - 1 && m.vocab[1] !== m.nVocab));
    if (gap) {
      for (const m of members) m.close();
      throw new LayerfoldError('bad_response', `${gap.name} holds vocabulary rows [${gap.vocab.join(', ')}): the members' rows do not tile the ${first.nVocab} tokens in member order`);
    }
    const leaderOnly = members.find((m) => !m.memberExchange);
    let chosen = exchange === 'auto' ? (leaderOnly ? 'leader' : 'members') : exchange;
    let linkFailure = null;
    try {
      if (chosen === 'members') {
        if (leaderOnly) throw new LayerfoldError('invalid_argument', `${leaderOnly.name} exchanges through its leader only: not a group exchanging member to member`);
        await everyAnswer(members.map((m) => m.linkPeers(urls))).catch((error) => {
          if (exchange === 'members' || members.some((m) => m.closed)) throw error;
          linkFailure = error.message;
          chosen = 'leader';
        });
      }
    } catch (error) {
      for (const m of members) m.close();
      throw error;
    }
    const group = new MemberGroup(members, { reconnect: connect, urls, exchange: chosen });
    group.linkFailure = linkFailure;
    return group;
  }

  /**
   * hidden [n, n_embd] at positions startPos.. of session `id` (made on first use) -> hidden
   * [n, n_embd], the bytes one node of these layers gives. perLayer: a model with per-layer
   * embeddings needs the range's layers' inputs, [layers, n, nEmbdPerLayer], as LayerNode.forward
   * takes them. Rows go to the members in calls of at most the fewest rows any member takes
   * (maxTokens: an edge member's budget was counted for so many), the same bytes as one call. A
   * call refused or failed on any member is abandoned on every member, leaving the session as
   * it was on all of them (a call of several such calls keeps the ones before it). kvRows
   * ({ [layer]: Uint8Array } of the call's positions, every head): the rows of the shared-KV
   * sources before the group that its layers read, as LayerNode.forward takes them; kvRowsOf(out)
   * then gives those of its own sources that later layers read.
   * @example const out = await group.forward({ session: 'a', startPos: 0, hidden });
   */
  forward(call) {
    if (!(call.hidden instanceof Float32Array) || call.hidden.length === 0 || call.hidden.length % this.nEmbd !== 0) {
      return Promise.reject(new RangeError(`hidden must be a Float32Array of a positive multiple of n_embd ${this.nEmbd} floats`));
    }
    return this.#inTurn(async () => {
      const rows = call.hidden.length / this.nEmbd;
      const most = Math.min(...this.#members.map((m) => m.maxTokens ?? Infinity));
      const layers = this.layers[1] - this.layers[0];
      const perRow = call.perLayer ? call.perLayer.length / (layers * rows) : 0;
      const out = new Float32Array(call.hidden.length);
      const parts = [];
      for (let r = 0; r < rows; r += most) {
        const n = Math.min(most, rows - r);
        const perLayer = call.perLayer && (n === rows ? call.perLayer : rowsOfEachLayer(call.perLayer, layers, rows, perRow, r, n));
        const part = { ...call, startPos: call.startPos + r, hidden: call.hidden.subarray(r * this.nEmbd, (r + n) * this.nEmbd), perLayer };
        const { output, kvRows } = await this.#forward(part, r, n);
        out.set(output, r * this.nEmbd);
        parts.push(kvRows);
      }
      const handedOut = joinKvRows(parts);
      if (handedOut) this.#handedOut.set(out, handedOut);
      return out;
    });
  }

  /** The K/V rows the forward that answered `out` handed out (LayerNode.kvRowsOf), or null. */
  kvRowsOf(out) {
    return this.#handedOut.get(out) ?? null;
  }

  // A member answers one request at a time: every call of the group waits for the one before.
  #inTurn(job) {
    const run = this.#queue.then(job);
    this.#queue = run.catch(() => {});
    return run;
  }

  // Members whose connection is gone are connected again (a restarted member has lost its
  // sessions: its next call is a position_mismatch, on which a pipeline replays the session).
  async #connected() {
    await Promise.all(this.#members.map(async (m, i) => {
      if (!m.closed || !this.#reconnect) return;
      const again = await this.#reconnect(i);
      if (again.layers[0] !== this.layers[0] || again.layers[1] !== this.layers[1]) {
        again.close();
        throw new LayerfoldError('invalid_argument', `${again.name} came back serving layers ${again.layers.join('-')}, not the group's ${this.layers.join('-')}`);
      }
      if (this.exchange === 'members') await again.linkPeers(this.#urls).catch((error) => { again.close(); throw error; });
      this.#members[i] = again;
    }));
    return this.#members;
  }

  // One call of the members: rows [r, r + n) of the caller's (kvRows are the caller's whole
  // rows) -> {output, kvRows: the group's hand-out, every head, or null}.
  async #forward(call, r, n) {
    const members = await this.#connected();
    const calls = members.map((m) => ({ ...call, kvRows: this.#kvRowsFor(m, call.kvRows, r, n) }));
    if (this.exchange === 'members') {
      const id = `${this.#callPrefix}-${++this.#calls}`;
      const phases = 4 * (this.layers[1] - this.layers[0]);
      const ends = await everyAnswer(members.map((m, i) => m.runAmongMembers(calls[i], { call: id, phases })));
      return { output: ends[0].output, kvRows: gatherKvRows(members, ends, n) };
    }
    try {
      let pieces = await everyAnswer(members.map((m, i) => m.begin(calls[i])));
      for (;;) {
        const answers = await everyAnswer(members.map((m) => m.exchange(pieces)));
        if (answers.every((a) => a.output)) return { output: answers[0].output, kvRows: gatherKvRows(members, answers, n) };
        if (answers.some((a) => a.output)) throw new LayerfoldError('internal', 'the members ended the call at different phases');
        pieces = answers.map((a) => a.piece);
      }
    } catch (error) {
      await Promise.allSettled(members.map((m) => m.abandon()));
      throw error;
    }
  }

  /**
   * Token ids -> {hidden [n, n_embd], perLayer [n_layer, n, n_embd_per_layer] or null}, a first
   * node's bytes: each token embedded by the member holding its row (holdsEmbedding).
   * @example const { hidden, perLayer } = await group.embed([2, 651, 6037]);
   */
  embed(tokens) {
    if (!this.holdsEmbedding) return Promise.reject(new LayerfoldError('failed_precondition', 'the group holds no token embedding'));
    const bad = tokens.findIndex((t) => !(Number.isInteger(t) && t >= 0 && t < this.nVocab));
    if (bad >= 0 || tokens.length === 0) {
      return Promise.reject(new LayerfoldError('invalid_argument', bad >= 0 ? `token id ${tokens[bad]} at position ${bad} is outside [0, ${this.nVocab})` : 'embed needs tokens'));
    }
    return this.#inTurn(async () => {
      const members = await this.#connected();
      const n = tokens.length;
      const nPl = members[0].nEmbdPerLayer;
      const hidden = new Float32Array(n * this.nEmbd);
      const perLayer = nPl > 0 ? new Float32Array(this.nLayer * n * nPl) : null;
      const mine = members.map((m) => [...tokens.keys()].filter((t) => tokens[t] >= m.vocab[0] && tokens[t] < m.vocab[1]));
      const most = Math.min(...members.map((m) => m.maxTokens ?? Infinity));
      const answers = await everyAnswer(members.map(async (m, i) => {
        const parts = [];
        for (let from = 0; from < mine[i].length; from += most) {
          const at = mine[i].slice(from, from + most);
          parts.push({ at, ...(await m.embed(at.map((t) => tokens[t]))) });
        }
        return parts;
      }));
      for (const { at, hidden: h, perLayer: p } of answers.flat()) {
        at.forEach((t, j) => {
          hidden.set(h.subarray(j * this.nEmbd, (j + 1) * this.nEmbd), t * this.nEmbd);
          for (let l = 0; perLayer && l < this.nLayer; l++) perLayer.set(p.subarray((l * at.length + j) * nPl, (l * at.length + j + 1) * nPl), (l * n + t) * nPl);
        });
      }
      return { hidden, perLayer };
    });
  }

  /**
   * hidden [rows, n_embd] -> logits [rows, n_vocab], a last node's bytes: each member gives its
   * rows of the vocabulary (holdsHead).
   * @example const logits = await group.logits(hidden);
   */
  logits(hidden) {
    if (!this.holdsHead) return Promise.reject(new LayerfoldError('failed_precondition', 'the group holds no head'));
    if (!(hidden instanceof Float32Array) || hidden.length === 0 || hidden.length % this.nEmbd !== 0) {
      return Promise.reject(new RangeError(`hidden must be a Float32Array of a positive multiple of n_embd ${this.nEmbd} floats`));
    }
    return this.#inTurn(async () => {
      const members = await this.#connected();
      const rows = hidden.length / this.nEmbd;
      const most = Math.min(...members.map((m) => m.maxTokens ?? Infinity));
      const logits = new Float32Array(rows * this.nVocab);
      for (let r = 0; r < rows; r += most) {
        const n = Math.min(most, rows - r);
        const part = hidden.subarray(r * this.nEmbd, (r + n) * this.nEmbd);
        const slices = await everyAnswer(members.map((m) => m.logits(part)));
        slices.forEach((slice, i) => {
          const [first, end] = members[i].vocab;
          for (let j = 0; j < n; j++) logits.set(slice.subarray(j * (end - first), (j + 1) * (end - first)), (r + j) * this.nVocab + first);
        });
      }
      return logits;
    });
  }

  // Member m's heads of rows [r, r + n) of the sources it mirrors, from the caller's kvRows.
  #kvRowsFor(m, kvRows, r, n) {
    const mine = {};
    for (const layout of m.kvLayout.in) {
      const whole = layout.nHeadKv * (layout.kRow + layout.vRow);
      const rows = kvRows?.[layout.layer];
      if (!rows || rows.byteLength % whole !== 0 || rows.byteLength / whole < r + n) {
        throw new LayerfoldError('invalid_argument', `layers ${this.layers[0]}-${this.layers[1] - 1} read layer ${layout.layer}'s KV cache: ` +
          `its K/V rows of the call's positions are missing or short (${rows?.byteLength ?? 0} bytes, ${whole} a position)`);
      }
      mine[layout.layer] = headsOf(rows.subarray(r * whole, (r + n) * whole), layout, n);
    }
    return mine;
  }

  /** The positions session `id` holds (0 for one never used), as member 0 counts them. */
  sessionLength(id) {
    return this.#inTurn(async () => (await this.#connected())[0].sessionLength(id));
  }

  /**
   * Cuts session `id` back to its first nPast positions on every member, or to their latest
   * checkpoint before them (LayerNode.truncate). The members took the same checkpoints and hold
   * slices of the same rings, so they reach one position. Members that reach different ones, or
   * a refusal by some while others cut, leave the session unusable: the error ('cut_refused', or
   * the refusing member's) says so, and the caller drops the session (a pipeline then replays
   * it). -> the positions the session then holds
   * @example const held = await group.truncate('a', 12); // 12, or a checkpoint's position before it
   */
  truncate(id, nPast) {
    const refusal = cutRefusal(id, nPast);
    if (refusal) return Promise.reject(refusal);
    return this.#inTurn(async () => this.#onePosition(await everyAnswer((await this.#connected()).map((m) => m.truncate(id, nPast))), 'a cut'));
  }

  /**
   * Keeps a checkpoint of session `id` at its length on every member, at most `keep` of them
   * (LayerNode.checkpoint). -> the position checkpointed
   * @example await group.checkpoint('a', { keep: 4 });
   */
  checkpoint(id, { keep = DEFAULT_CHECKPOINTS } = {}) {
    const refusal = keepRefusal(id, keep);
    if (refusal) return Promise.reject(refusal);
    return this.#inTurn(async () => this.#onePosition(await everyAnswer((await this.#connected()).map((m) => m.checkpoint(id, keep))), 'a checkpoint'));
  }

  // The one position every member answered, or 'cut_refused' naming where they differ.
  #onePosition(positions, what) {
    if (positions.every((p) => p === positions[0])) return positions[0];
    const said = positions.map((p, i) => `${this.names[i]} at ${p}`).join(', ');
    throw new LayerfoldError('cut_refused', `${what} left the members at different positions (${said}): drop the session`);
  }

  /** Frees session `id` on every member. */
  dropSession(id) {
    return this.#inTurn(async () => {
      await Promise.all((await this.#connected()).map((m) => m.dropSession(id)));
    });
  }

  /** The WASM memory of the members in this process, in bytes (remote members count 0). */
  memoryBytes() {
    return this.#members.reduce((sum, m) => sum + (m.memoryBytes?.() ?? 0), 0);
  }

  close() {
    for (const m of this.#members) m.close();
    this.#members = [];
  }
}

// Every member's answer, once all have answered or failed (so that none is still under way when
// the call is abandoned), or the first failure that is not a member's report of another's.
async function everyAnswer(requests) {
  const settled = await Promise.allSettled(requests);
  const failures = settled.filter((s) => s.status === 'rejected').map((s) => s.reason);
  if (failures.length > 0) throw failures.find((e) => e.code !== 'peer_failed') ?? failures[0];
  return settled.map((s) => s.value);
}

// The members' K/V rows of a call's n positions (ends[i].kvRows, their heads of their
// kvLayout.out's layers), put together by head -> { [layer]: rows of every head }, or null.
function gatherKvRows(members, ends, n) {
  if (members[0].kvLayout.out.length === 0) return null;
  const rows = {};
  members[0].kvLayout.out.forEach(({ layer, nHeadKv, kRow, vRow }, j) => {
    rows[layer] = new Uint8Array(n * nHeadKv * (kRow + vRow));
    members.forEach((m, i) => placeHeads(rows[layer], ends[i].kvRows[layer], m.kvLayout.out[j], n));
  });
  return rows;
}

// The K/V rows of consecutive calls, joined position after position (null: none handed out).
function joinKvRows(parts) {
  if (parts[0] === null) return null;
  if (parts.length === 1) return parts[0];
  const rows = {};
  for (const layer of Object.keys(parts[0])) {
    rows[layer] = new Uint8Array(parts.reduce((n, p) => n + p[layer].byteLength, 0));
    let at = 0;
    for (const p of parts) {
      rows[layer].set(p[layer], at);
      at += p[layer].byteLength;
    }
  }
  return rows;
}

// Rows [r, r + n) of each layer's [rows, width] block of values [layers, rows, width].
function rowsOfEachLayer(values, layers, rows, width, r, n) {
  const out = new Float32Array(layers * n * width);
  for (let l = 0; l < layers; l++) out.set(values.subarray((l * rows + r) * width, (l * rows + r + n) * width), l * n * width);
  return out;
}

function checkMemberCount(n) {
  if (!(Number.isSafeInteger(n) && n >= 1)) {
    throw new LayerfoldError('invalid_argument', `members must be a whole number >= 1, not ${n}`);
  }
}
