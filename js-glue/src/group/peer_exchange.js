// A member's links to the other members of its group, for exchanging pieces member to member
// (docs/tensor-parallel.md, "Member to member"): the member dials every other member's
// /v1/member and sends its pieces on those connections; the others' pieces come in on the
// connections they dialed (MemberService hands them here). One hop a phase instead of the two
// through a leader, and no leader in the way. A piece is tagged with its call and phase. A peer
// may begin a call before this member does, and be one phase ahead of it, so a peer's pieces (and
// its failure) are held for the call under way or, between calls, for the next one; a peer never
// needs more than HELD_PER_PEER held, and what is past that is dropped (the gather then names it).
// The links are WebSockets dialed by `dial` (group/ws_link.js in Node, edge/fetch_link.js in a
// Workers-style isolate): a link is {open(), send(bytes), close(), onmessage, onclose}.
import { redactUrl } from '../log/redact.js';
import { decodeFrame, encodeFrame, MEMBER_PATH } from '../protocol/member_frames.js';
import { LayerfoldError } from '../wasm/capi.js';

const HELD_PER_PEER = 3;  // pieces of this phase and the next, and a failure
const CALL_ID = /^[A-Za-z0-9_-]{1,64}$/;
const MAX_MESSAGE = 1000;  // of a peer's failure, passed on in this member's

export class PeerExchange {
  #index;
  #members;
  #layers;
  #authToken;
  #dialLink;
  #urls = null;          // every member's URL, in member order (the leader's `peers`)
  #out = new Map();      // member j -> our link to j
  #held = new Map();     // `${call}/${phase or 'fail'}/${j}` -> the piece (or failure message) member j sent
  #call = null;          // the call under way
  #waiting = null;       // {phase, resolve, reject, timer} of the gather under way

  /**
   * Member `index` of `members` serving `layers`; authToken: the bearer token it dials the
   * others with (a group's members share one); dial(url, {authToken, deadlineMs}): a link to the
   * WebSocket at url (ws(s):), or a rejection saying why not.
   */
  constructor({ index, members, layers, authToken, dial }) {
    this.#index = index;
    this.#members = members;
    this.#layers = layers;
    this.#authToken = authToken;
    this.#dialLink = dial;
  }

  /** What a peer's hello must say (member j of this group's size and layers, not this member). */
  checkHello({ index: j, members, layers }) {
    if (!Number.isSafeInteger(j) || j < 0 || j >= this.#members || j === this.#index || members !== this.#members ||
        !Array.isArray(layers) || layers[0] !== this.#layers[0] || layers[1] !== this.#layers[1]) {
      throw new LayerfoldError('invalid_argument', `member ${this.#index} of ${this.#members} over layers ${this.#layers.join('-')}: ` +
        `a hello from member ${j} of ${members} over layers ${Array.isArray(layers) ? layers.join('-') : layers} is not one of its group`);
    }
    return j;
  }

  /**
   * Takes the members' URLs (in member order) and dials each other member anew; resolves once
   * every one has taken the hello, or rejects naming the first that did not within deadlineMs.
   * Links are made anew for each leader's connection that asks: a Workers-style isolate may use
   * a WebSocket only within the request that opened it, and a leader's calls come on its own
   * connection, the request its `peers` came on.
   */
  async connect(urls, deadlineMs) {
    const dialable = (u) => typeof u === 'string' && URL.canParse(u) && ['http:', 'https:', 'ws:', 'wss:'].includes(new URL(u).protocol);
    if (!Array.isArray(urls) || urls.length !== this.#members || !urls.every(dialable)) {
      throw new LayerfoldError('invalid_argument', `peers must be the http(s) or ws(s) URLs of all ${this.#members} members, in member order`);
    }
    for (const link of this.#out.values()) link.close();
    this.#out.clear();
    this.#urls = urls;
    await this.ready(deadlineMs);
  }

  /** Dials the members whose link is missing or gone (the URLs of the last connect). */
  async ready(deadlineMs) {
    if (!this.#urls) throw new LayerfoldError('failed_precondition', 'no peers were given: the leader sends them before a call exchanged member to member');
    const dials = [];
    for (let j = 0; j < this.#members; ++j) {
      if (j !== this.#index && !this.#out.get(j)?.open()) dials.push(this.#dial(j, deadlineMs));
    }
    const settled = await Promise.allSettled(dials);
    const failed = settled.find((s) => s.status === 'rejected');
    if (failed) throw failed.reason;
  }

  async #dial(j, deadlineMs) {
    this.#out.get(j)?.close();
    this.#out.delete(j);
    const name = `member ${j} (${redactUrl(this.#urls[j])})`;
    const url = new URL(this.#urls[j]);
    url.protocol = url.protocol === 'https:' || url.protocol === 'wss:' ? 'wss:' : 'ws:';
    url.pathname = MEMBER_PATH;
    let timer;
    let link = null;
    const fail = (why) => {
      link?.close();
      return new LayerfoldError('unavailable', `could not reach ${name}: ${why}`);
    };
    const deadline = new Promise((resolve, reject) => {
      timer = setTimeout(() => reject(fail(`no answer to its hello within ${deadlineMs} ms`)), deadlineMs);
    });
    const hello = (async () => {
      link = await this.#dialLink(url.href, { authToken: this.#authToken, deadlineMs }).catch((error) => { throw fail(error.message); });
      await new Promise((resolve, reject) => {
        link.onclose = () => reject(fail('it closed the connection'));
        link.onmessage = (bytes) => {
          try {
            const { header } = decodeFrame(bytes, name);
            if (header.op === 'ok') resolve();
            else reject(fail(`it refused the hello: ${String(header.message ?? header.op)}`));
          } catch (error) {
            reject(fail(error.message));
          }
        };
        link.send(encodeFrame({ op: 'hello', index: this.#index, members: this.#members, layers: this.#layers }));
      });
      return link;
    })();
    try {
      await Promise.race([hello, deadline]);
    } catch (error) {
      hello.then((late) => late.close(), () => {});  // a link that opens past the deadline is not kept
      throw error;
    } finally {
      clearTimeout(timer);
    }
    link.onclose = null;
    link.onmessage = () => link.close();  // a peer sends nothing back on our link
    this.#out.set(j, link);
  }

  /** Starts call `call` (the leader's id of it): what is held of any other call is dropped. */
  begin(call) {
    if (typeof call !== 'string' || !CALL_ID.test(call)) {
      throw new LayerfoldError('invalid_argument', 'a call id must be 1 to 64 letters, digits, - or _');
    }
    this.#call = call;
    for (const key of this.#held.keys()) if (!key.startsWith(`${call}/`)) this.#held.delete(key);
  }

  /** The call under way is over (done, failed or abandoned). */
  end() {
    this.abort(new LayerfoldError('aborted', 'the call was ended'));
    this.#call = null;
    this.#held.clear();
  }

  /** A gather under way fails with `error`. */
  abort(error) {
    this.#settle(error);
  }

  /**
   * Sends this member's piece of `phase` to every other member and resolves with every member's
   * piece of it in member order, once all have come; rejects naming the member whose piece did
   * not come within deadlineMs, or that failed the call, or whose piece is not finite.
   */
  gather(phase, piece, deadlineMs, what) {
    const frame = encodeFrame({ op: 'piece', call: this.#call, phase, from: this.#index }, [piece]);
    for (const [j, link] of this.#out) {
      if (!link.open()) return Promise.reject(new LayerfoldError('unavailable', `its link to member ${j} is gone`));
      link.send(frame);
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        const missing = this.#missing(phase);
        this.#settle(new LayerfoldError('deadline_exceeded', `member ${missing} sent no piece of ${what} within ${deadlineMs} ms`));
      }, deadlineMs);
      this.#waiting = { phase, piece, resolve, reject, timer };
      this.#check();
    });
  }

  /** A frame from member j on the link it dialed: a piece, or its failure of a call. */
  received(j, header, payload) {
    const { op, call, phase } = header;
    if ((op !== 'piece' && op !== 'fail') || typeof call !== 'string' || !CALL_ID.test(call) || (op === 'piece' && !Number.isSafeInteger(phase))) {
      throw new LayerfoldError('bad_frame', `member ${j} sent ${JSON.stringify(op)} on its link, not a piece`);
    }
    if (this.#call !== null && call !== this.#call) return;  // of a call ended here
    // A member goes from call to call: one of another call from it is over.
    for (const key of this.#held.keys()) if (key.endsWith(`/${j}`) && !key.startsWith(`${call}/`)) this.#held.delete(key);
    const fromJ = [...this.#held.keys()].filter((k) => k.endsWith(`/${j}`)).length;
    if (fromJ >= HELD_PER_PEER) return;
    this.#held.set(`${call}/${op === 'fail' ? 'fail' : phase}/${j}`, op === 'fail' ? String(header.message ?? 'failed').slice(0, MAX_MESSAGE) : payload);
    this.#check();
  }

  /** Member j's link to this member closed: a gather waiting for its piece fails naming it. */
  gone(j) {
    if (this.#waiting && !this.#held.has(`${this.#call}/${this.#waiting.phase}/${j}`)) {
      this.#settle(new LayerfoldError('unavailable', `member ${j} closed its link mid-call`));
    }
  }

  /** Tells every other member that this member failed the call (they stop waiting for it). */
  fail(error) {
    if (this.#call === null) return;
    const frame = encodeFrame({ op: 'fail', call: this.#call, from: this.#index, message: error.message });
    for (const link of this.#out.values()) if (link.open()) link.send(frame);
  }

  close() {
    for (const link of this.#out.values()) link.close();
    this.#out.clear();
    this.end();
  }

  #missing(phase) {
    for (let j = 0; j < this.#members; ++j) if (j !== this.#index && !this.#held.has(`${this.#call}/${phase}/${j}`)) return j;
    return -1;
  }

  #check() {
    const waiting = this.#waiting;
    if (!waiting) return;
    for (let j = 0; j < this.#members; ++j) {
      const failed = this.#held.get(`${this.#call}/fail/${j}`);
      if (failed !== undefined) {
        this.#settle(new LayerfoldError('peer_failed', `member ${j} failed the call: ${failed}`));
        return;
      }
    }
    if (this.#missing(waiting.phase) !== -1) return;
    const pieces = [];
    for (let j = 0; j < this.#members; ++j) {
      if (j === this.#index) {
        pieces.push(waiting.piece);
        continue;
      }
      const key = `${this.#call}/${waiting.phase}/${j}`;
      const piece = this.#held.get(key);
      this.#held.delete(key);
      const bad = piece.findIndex((v) => !Number.isFinite(v));
      if (bad !== -1) {
        this.#settle(new LayerfoldError('bad_response', `member ${j}'s piece holds a non-finite value at ${bad}`));
        return;
      }
      pieces.push(piece);
    }
    this.#settle(null, pieces);
  }

  #settle(error, pieces) {
    const waiting = this.#waiting;
    if (!waiting) return;
    this.#waiting = null;
    clearTimeout(waiting.timer);
    if (error) waiting.reject(error);
    else waiting.resolve(pieces);
  }
}
