// A model object behind an http(s) URL, read with Range requests: the host's object-source
// interface { name, size, identity, read(start, end), readInto(start, end, target), close() }.
// Bodies stream straight into the target view; a failed transfer resumes from the byte reached.

const DEFAULTS = { retries: 5, backoffMs: 250, maxBackoffMs: 8000, timeoutMs: 30000 };

/** An Error with a machine-readable code; `retryable` marks transient transport failures. */
export class ObjectSourceError extends Error {
  constructor(message, { code, status, retryable = false, cause } = {}) {
    super(message, { cause });
    this.code = code;
    this.status = status;
    this.retryable = retryable;
  }
}

const CODE_BY_STATUS = { 401: 'unauthorized', 403: 'unauthorized', 404: 'not_found', 412: 'changed', 416: 'bad_range' };

function statusError(url, response) {
  const retryable = response.status >= 500 || response.status === 429;
  const code = CODE_BY_STATUS[response.status] ?? (retryable ? 'server_error' : 'http_error');
  return new ObjectSourceError(`${url}: HTTP ${response.status} ${response.statusText}`.trim(), { code, status: response.status, retryable });
}

/**
 * Runs attempt(failures) until it succeeds, retrying errors marked retryable (and network
 * errors) up to `retries` times with exponential backoff and full jitter.
 * @example const r = await withRetries((n) => fetchOnce(), { retries: 3, onRetry: (e) => log(e.message) });
 */
export async function withRetries(attempt, { retries = DEFAULTS.retries, backoffMs = DEFAULTS.backoffMs, maxBackoffMs = DEFAULTS.maxBackoffMs, onRetry } = {}) {
  for (let failures = 0; ; failures++) {
    try {
      return await attempt(failures);
    } catch (error) {
      const transient = error.retryable ?? !(error instanceof ObjectSourceError);
      if (!transient || failures >= retries) throw error;
      onRetry?.(error, failures + 1);
      const ceiling = Math.min(maxBackoffMs, backoffMs * 2 ** failures);
      await new Promise((resolve) => setTimeout(resolve, Math.random() * ceiling));
    }
  }
}

export class HttpSource {
  /**
   * request(url, init) defaults to the global fetch; the S3 source passes a signing one.
   * @param {string} url
   * @param {{retries?: number, backoffMs?: number, maxBackoffMs?: number, timeoutMs?: number,
   *          request?: (url: string, init: object) => Promise<Response>, name?: string,
   *          onRetry?: (error: Error, attempt: number) => void}} [options]
   * @example const source = await HttpSource.open('https://example.com/tiny.gguf', { retries: 3 });
   */
  static async open(url, options = {}) {
    const source = new HttpSource(url, options);
    await source.#stat();
    return source;
  }

  #url;
  #options;
  #request;

  constructor(url, options) {
    this.#url = url;
    this.#options = { ...DEFAULTS, ...options };
    this.#request = options.request ?? ((u, init) => fetch(u, init));
    this.name = options.name ?? url;
    this.size = 0;
    this.etag = null;
    this.lastModified = null;
    /** Requests sent and retries made, for diagnostics. */
    this.stats = { requests: 0, retries: 0 };
  }

  /** What the cache keys pieces by: the etag, else size and last-modified. */
  get identity() {
    return `${this.name}#${this.etag ?? `${this.size}:${this.lastModified ?? ''}`}`;
  }

  async #stat() {
    await this.#retrying(async () => {
      const response = await this.#send('HEAD', {}, AbortSignal.timeout(this.#options.timeoutMs));
      if (!response.ok) throw statusError(this.name, response);
      const length = response.headers.get('content-length');
      this.etag = response.headers.get('etag');
      this.lastModified = response.headers.get('last-modified');
      if (length !== null) {
        this.size = Number(length);
        return;
      }
      // No length on HEAD (some gateways): a one-byte range tells the total.
      const probe = await this.#send('GET', { range: 'bytes=0-0' }, AbortSignal.timeout(this.#options.timeoutMs));
      await probe.body?.cancel();
      if (probe.status !== 206) throw this.#rangeError(probe);
      this.size = Number(probe.headers.get('content-range')?.split('/')[1]);
      if (!Number.isFinite(this.size)) throw new ObjectSourceError(`${this.name}: no object size in HEAD or Content-Range`, { code: 'bad_response' });
    });
  }

  async read(start, end) {
    const out = new Uint8Array(end - start);
    await this.readInto(start, end, out);
    return out;
  }

  /** Fills target with bytes [start, end), resuming a broken transfer where it stopped. */
  async readInto(start, end, target) {
    if (start < 0 || end > this.size || start > end) {
      throw new ObjectSourceError(`${this.name}: range [${start}, ${end}) outside the object's ${this.size} bytes`, { code: 'bad_range' });
    }
    if (end === start) return;
    let reached = 0;
    await this.#retrying(async () => {
      try {
        reached += await this.#readOnce(start + reached, end, target.subarray(reached, end - start));
      } catch (error) {
        reached += error.reached ?? 0;
        throw error;
      }
    });
  }

  // One ranged GET into target; progress made before a failure is kept in error.reached.
  async #readOnce(start, end, target) {
    const controller = new AbortController();
    let timer;
    const arm = () => {
      clearTimeout(timer);
      timer = setTimeout(() => controller.abort(new ObjectSourceError(`${this.name}: no data for ${this.#options.timeoutMs} ms`, { code: 'timeout', retryable: true })), this.#options.timeoutMs);
    };
    arm();
    let done = 0;
    try {
      const response = await this.#send('GET', { range: `bytes=${start}-${end - 1}` }, controller.signal);
      if (response.status !== 206) {
        await response.body?.cancel();
        throw response.ok ? this.#rangeError(response) : statusError(this.name, response);
      }
      this.#checkSame(response, start);
      const reader = response.body.getReader();
      for (;;) {
        const { done: finished, value } = await reader.read();
        if (finished) break;
        arm();
        if (done + value.length > target.length) {
          await reader.cancel();
          throw new ObjectSourceError(`${this.name}: server sent more than the ${end - start} bytes asked for at ${start}`, { code: 'bad_response' });
        }
        target.set(value, done);
        done += value.length;
      }
      if (done < target.length) {
        throw new ObjectSourceError(`${this.name}: body ended at byte ${start + done}, expected ${end}`, { code: 'truncated', retryable: true });
      }
      return done;
    } catch (error) {
      const reason = controller.signal.aborted ? controller.signal.reason : error;
      reason.reached = done;
      throw reason;
    } finally {
      clearTimeout(timer);
    }
  }

  #checkSame(response, start) {
    const etag = response.headers.get('etag');
    const [range, total] = (response.headers.get('content-range') ?? '').replace('bytes ', '').split('/');
    if ((this.etag && etag && etag !== this.etag) || (total && total !== '*' && Number(total) !== this.size)) {
      throw new ObjectSourceError(`${this.name}: the object changed while reading (etag ${etag}, size ${total})`, { code: 'changed' });
    }
    if (range && Number(range.split('-')[0]) !== start) {
      throw new ObjectSourceError(`${this.name}: asked for byte ${start}, server sent range ${range}`, { code: 'bad_response' });
    }
  }

  #rangeError(response) {
    return new ObjectSourceError(`${this.name}: server ignored the Range request (HTTP ${response.status} instead of 206)`, { code: 'range_ignored', status: response.status });
  }

  async #send(method, headers, signal) {
    this.stats.requests++;
    return this.#request(this.#url, { method, headers, signal });
  }

  // A transport error that outlived the retries is reported against this object's name.
  async #retrying(attempt) {
    try {
      return await withRetries(attempt, { ...this.#options, onRetry: (error, n) => { this.stats.retries++; this.#options.onRetry?.(error, n); } });
    } catch (error) {
      if (error instanceof ObjectSourceError) throw error;
      throw new ObjectSourceError(`${this.name}: ${error.cause?.message ?? error.message} (after ${this.stats.retries} retries)`, { code: 'network', cause: error });
    }
  }

  async close() {}
}
