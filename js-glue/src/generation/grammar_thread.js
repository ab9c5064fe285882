// The grammar engine off the event loop, in Node: a worker thread holding its own tokenizer and
// XGrammar (tokens/grammar/engine.js), each request's constraints living there and asked for a
// bitmask per token. Opening the engine takes a second on a 262144-token vocabulary and a new
// schema's compile up to seconds; on the gateway's event loop that would stall every other
// stream and /healthz. On the thread, it holds up only the other constrained requests' next
// tokens, which the same thread serves. (An edge isolate serves one request at a time and runs
// the engine inline: docs/gateway.md.)
import { isMainThread, parentPort } from 'node:worker_threads';

import { stopIds } from '../tokens/chat.js';
import { applyBitmask, checkRow } from '../tokens/grammar/constraint.js';
import { GrammarEngine } from '../tokens/grammar/engine.js';
import { loadXGrammar } from '../tokens/grammar/load_node.js';
import { SchemaError } from '../tokens/grammar/schema_check.js';
import { headerTokenizer, headerWorker, inHeaderWorker } from './header_worker.js';
import { answerCalls, ThreadCalls } from './thread_calls.js';

// A SchemaError crosses the thread as its fields; anything else as its message.
const toError = ({ message, keyword, code }) => (keyword !== undefined ? new SchemaError(keyword, message, code) : new Error(message));

/**
 * GrammarEngine's constraint and callConstraint, served by a thread started at the first call
 * (and again at the next call after a thread failed: the constraints it held are lost, their
 * requests fail).
 * @example const grammar = new GrammarThread(pipeline.header, pipeline.tokenizer.nVocab); const c = await grammar.constraint({ type: 'json_object' });
 */
export class GrammarThread {
  #header;
  #nVocab;
  #calls = null;
  #nextConstraint = 0;

  /** header: the model's (gguf/header.js ModelHeader, its bytes parsed again there); nVocab: its vocabulary's size. */
  constructor(header, nVocab) {
    this.#header = header;
    this.#nVocab = nVocab;
  }

  #thread() {
    if (this.#calls === null || this.#calls.failed) {
      this.#calls = new ThreadCalls(headerWorker(new URL(import.meta.url), this.#header), 'the grammar thread', toError);
    }
    return this.#calls;
  }

  async #open(message) {
    const calls = this.#thread();
    const cid = this.#nextConstraint++;
    await calls.call({ ...message, cid });
    return new ThreadConstraint(calls, cid, this.#nVocab);
  }

  /** GrammarEngine.constraint on the thread. */
  constraint(format) {
    return this.#open({ kind: 'constraint', format });
  }

  /** GrammarEngine.callConstraint on the thread. */
  callConstraint(tools, options = {}) {
    return this.#open({ kind: 'callConstraint', tools, options });
  }

  /** Ends the thread. */
  async close() {
    await this.#calls?.close();
  }
}

// One constraint living on the thread (constraint.js's TokenConstraint). Accepted tokens travel
// with the next call rather than on their own, so a token costs one message each way (its
// bitmask's); a token the thread refuses (which its own mask allowed: a fault, not the model's)
// fails that next call.
class ThreadConstraint {
  #calls;
  #cid;
  #nVocab;
  #accepted = [];

  constructor(calls, cid, nVocab) {
    this.#calls = calls;
    this.#cid = cid;
    this.#nVocab = nVocab;
  }

  #call(message) {
    const accepted = this.#accepted;
    this.#accepted = [];
    return this.#calls.call({ ...message, cid: this.#cid, accepted });
  }

  async mask(logits) {
    checkRow(logits, this.#nVocab);
    applyBitmask(logits, await this.#call({ kind: 'bitmask' }));
  }

  async accept(id) {
    this.#accepted.push(id);
    return true;
  }

  validPrefix(draft) {
    return this.#call({ kind: 'validPrefix', draft });
  }

  close() {
    this.#calls.post({ kind: 'close', cid: this.#cid });
  }
}

// The thread's side: the tokenizer built at once, the engine opened at its first constraint.
async function serve() {
  const tokenizer = await headerTokenizer();
  const engine = new GrammarEngine(loadXGrammar, tokenizer, stopIds(tokenizer));
  const constraints = new Map();  // cid -> Constraint
  const held = (cid) => {
    const c = constraints.get(cid);
    if (!c) throw new Error(`the grammar thread holds no constraint ${cid} (closed, or made by a thread that failed)`);
    return c;
  };
  // The tokens accepted since the constraint's last call, first.
  const advanced = async (cid, accepted) => {
    const c = held(cid);
    for (const id of accepted) if (!(await c.accept(id))) throw new Error(`the grammar refused token ${id}, which its own mask allowed`);
    return c;
  };
  answerCalls(parentPort, async ({ kind, cid, format, tools, options, accepted, draft }) => {
    switch (kind) {
      case 'constraint':
        constraints.set(cid, await engine.constraint(format));
        return null;
      case 'callConstraint':
        constraints.set(cid, await engine.callConstraint(tools, options));
        return null;
      case 'bitmask':
        return (await advanced(cid, accepted)).bitmask();
      case 'validPrefix':
        return (await advanced(cid, accepted)).validPrefix(draft);
      case 'close':
        constraints.get(cid)?.close();
        constraints.delete(cid);
        return null;
      default:
        throw new Error(`the grammar thread has no call ${kind}`);
    }
  }, (error) => (error instanceof SchemaError ? { keyword: error.keyword, code: error.code } : {}));
}

if (!isMainThread && inHeaderWorker()) await serve();
