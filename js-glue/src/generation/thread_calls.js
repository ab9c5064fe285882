// Calls to a worker thread answered in messages: each call posts {id, ...message} and waits for
// the thread's {id, value} or {id, error}; when the thread fails or exits, every call still
// waiting, and every later one, rejects with that failure.

export class ThreadCalls {
  #worker;
  #pending = new Map();  // id -> {resolve, reject}
  #next = 0;
  #failure = null;

  /**
   * @param {import('node:worker_threads').Worker} worker
   * @param {string} what the thread's name in the failure's message ("the tokenizer thread")
   * @param {(error: {message: string}) => Error} toError an Error from a thread's error answer
   */
  constructor(worker, what, toError) {
    this.#worker = worker;
    worker.on('message', ({ id, value, error }) => {
      const call = this.#pending.get(id);
      this.#pending.delete(id);
      if (error) call?.reject(toError(error));
      else call?.resolve(value);
    });
    const fail = (error) => {
      this.#failure ??= error;
      for (const call of this.#pending.values()) call.reject(this.#failure);
      this.#pending.clear();
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`${what} exited (code ${code})`)));
  }

  /** Whether the thread has failed or exited: no call will be answered. */
  get failed() {
    return this.#failure !== null;
  }

  /** The thread's answer to `message`; `transfer` as postMessage takes it. */
  call(message, transfer = []) {
    if (this.#failure) return Promise.reject(this.#failure);
    const id = this.#next++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      this.#worker.postMessage({ id, ...message }, transfer);
    });
  }

  /** Posts `message` with no answer awaited. */
  post(message) {
    if (!this.#failure) this.#worker.postMessage(message);
  }

  /** Ends the thread; waiting and later calls reject. */
  async close() {
    await this.#worker.terminate();
  }
}

/**
 * The thread's side: answers each {id, ...message} with {id, value} from `handle(message)` (a
 * value or a promise of one; a typed array's buffer is transferred), or {id, error} from what it
 * throws: its message and `fields(error)`.
 * @example answerCalls(parentPort, (m) => encode(m.input), (e) => ({ code: e.code ?? null }));
 */
export function answerCalls(port, handle, fields = () => ({})) {
  port.on('message', async ({ id, ...message }) => {
    try {
      const value = await handle(message);
      if (id !== undefined) port.postMessage({ id, value }, ArrayBuffer.isView(value) ? [value.buffer] : []);
    } catch (error) {
      if (id !== undefined) port.postMessage({ id, error: { message: error.message, ...fields(error) } });
    }
  });
}
