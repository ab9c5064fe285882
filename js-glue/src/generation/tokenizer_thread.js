// Tokenizing off the event loop, in Node: a worker thread holding its own single-thread module
// and tokenizer, built from the model's header bytes. A multi-megabyte prompt takes seconds to
// tokenize; on the gateway's event loop that would stall every other request and /healthz.
// Prompts are tokenized one after another, in the order they arrive. (An edge isolate serves
// one request at a time and tokenizes inline: docs/gateway.md.)
import { isMainThread, parentPort } from 'node:worker_threads';

import { encodePrompt } from '../tokens/prompt_input.js';
import { LayerfoldError } from '../wasm/capi.js';
import { headerTokenizer, headerWorker, inHeaderWorker } from './header_worker.js';
import { answerCalls, ThreadCalls } from './thread_calls.js';

export class TokenizerThread {
  /**
   * A thread with the tokenizer of `header` (gguf/header.js ModelHeader: its bytes are parsed
   * there again); resolves once it is ready, rejects with its error.
   * @example const thread = await TokenizerThread.open(pipeline.header); const ids = await thread.encode(textPrompt('Hi'));
   */
  static async open(header) {
    const thread = new TokenizerThread(headerWorker(new URL(import.meta.url), header));
    await thread.#calls.call({ kind: 'ready' });
    return thread;
  }

  #calls;

  constructor(worker) {
    this.#calls = new ThreadCalls(worker, 'the tokenizer thread', (error) => (error.code ? new LayerfoldError(error.code, error.message) : new Error(error.message)));
  }

  /**
   * A prompt's token ids (tokens/prompt_input.js's input), tokenized on the thread. The input's
   * bytes are handed over to the thread: the caller must not use them afterwards.
   * @example const ids = await thread.encode(renderChat(header, tokenizer, messages));
   */
  async encode(input) {
    return Array.from(await this.#calls.call({ kind: 'encode', input }, [input.bytes.buffer]));
  }

  /** Ends the thread; pending and later calls reject. */
  async close() {
    await this.#calls.close();
  }
}

// The thread's side: one tokenizer, one call at a time; an error goes back with its code.
async function serve() {
  const tokenizer = await headerTokenizer();
  answerCalls(parentPort, ({ kind, input }) => (kind === 'ready' ? null : Int32Array.from(encodePrompt(tokenizer, input))),
    (error) => ({ code: error instanceof LayerfoldError ? error.code : null }));
}

if (!isMainThread && inHeaderWorker()) await serve();
