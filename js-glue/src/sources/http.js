// A model object behind an http(s) URL, read with Range requests: the host's object-source
// interface { name, size, identity, validator, read(start, end), readInto(start, end, target),
// close() }. Bodies stream straight into the target view; a failed transfer resumes from the byte
// reached. Every range is asked for on the condition that the object is still the one opened
// (If-Match / If-Range on a strong ETag, else If-Unmodified-Since on its Last-Modified) and every
// answer's validators are compared, so a node never loads ranges of two versions of a file.

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

/** Where a source's warnings go when no onWarning is given. */
export const warnOnStderr = (message) => console.warn(`layerfold: ${message}`);

const CODE_BY_STATUS = { 401: 'unauthorized', 403: 'unauthorized', 404: 'not_found', 416: 'bad_range' };

// Bytes asked for again, before the byte reached, when a transfer resumes without a strong ETag:
// they must equal what was received, or the object changed between the two requests.
const RESUME_OVERLAP = 64 * 1024;

/** The error for an object that is no longer the one opened (or cached): never a mixed load. */
export function sourceChanged(name, why, { status, staleCache = false } = {}) {
  const error = new ObjectSourceError(`${name}: the object changed during the load (${why})`, { code: 'source_changed', status });
  /** True when the disk cache held the other version and has dropped it: a new load is clean. */
  error.staleCache = staleCache;
  return error;
}

function sameBytes(a, b) {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return a.length === b.length;
}

const isStrong = (etag) => etag !== null && !etag.startsWith('W/');
const sameEtag = (a, b) => a.replace(/^W\//, '') === b.replace(/^W\//, '');

/** The error for an HTTP answer that is not a success, coded by its status (401/403 'unauthorized', 404 'not_found', ...). */
export function statusError(url, response) {
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

  /**
   * What each range read is checked against: 'etag' (a strong ETag, sent as If-Match and
   * If-Range), 'last-modified' (If-Unmodified-Since, a one-second clock), or 'size' (the server
   * gives neither: only the size and the bytes read twice can tell a change; openSource refuses
   * such a source unless allowed, unvalidated.js).
   */
  get validator() {
    if (isStrong(this.etag)) return 'etag';
    return this.lastModified ? 'last-modified' : 'size';
  }

  // The condition every range is asked for on. If-Match answers 412 for another version; If-Range
  // makes a server that ignores If-Match answer 200 with the whole new object instead of a range.
  #conditions() {
    if (isStrong(this.etag)) return { 'if-match': this.etag, 'if-range': this.etag };
    return this.lastModified ? { 'if-unmodified-since': this.lastModified } : {};
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
      // Without a strong ETag a resumed transfer starts a little before the byte reached, and
      // those bytes are compared with the ones received.
      const known = this.validator === 'etag' ? 0 : Math.min(reached, RESUME_OVERLAP);
      try {
        reached += await this.#readOnce(start + reached - known, end, target.subarray(reached - known, end - start), known);
      } catch (error) {
        reached += error.reached ?? 0;
        throw error;
      }
    });
  }

  // One ranged GET into target, whose first `known` bytes are already there and must come back
  // the same; -> the bytes placed after them. Progress made before a failure is kept in
  // error.reached.
  async #readOnce(start, end, target, known = 0) {
    const controller = new AbortController();
    let timer;
    const arm = () => {
      clearTimeout(timer);
      timer = setTimeout(() => controller.abort(new ObjectSourceError(`${this.name}: no data for ${this.#options.timeoutMs} ms`, { code: 'timeout', retryable: true })), this.#options.timeoutMs);
    };
    arm();
    let done = 0;
    try {
      const response = await this.#send('GET', { range: `bytes=${start}-${end - 1}`, ...this.#conditions() }, controller.signal);
      if (response.status !== 206) {
        await response.body?.cancel();
        throw this.#notARange(response);
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
        const overlap = Math.max(0, Math.min(known - done, value.length));
        if (overlap > 0 && !sameBytes(value.subarray(0, overlap), target.subarray(done, done + overlap))) {
          await reader.cancel();
          throw sourceChanged(this.name, `bytes from ${start + done} differ from the ones read before the transfer resumed`);
        }
        target.set(value.subarray(overlap), done + overlap);
        done += value.length;
      }
      if (done < target.length) {
        throw new ObjectSourceError(`${this.name}: body ended at byte ${start + done}, expected ${end}`, { code: 'truncated', retryable: true });
      }
      return done - known;
    } catch (error) {
      const reason = controller.signal.aborted ? controller.signal.reason : error;
      reason.reached = Math.max(0, done - known);
      throw reason;
    } finally {
      clearTimeout(timer);
    }
  }

  // The answer's validators against the ones the object was opened with: a server that ignores
  // the conditions still says which version it sent.
  #checkSame(response, start) {
    const etag = response.headers.get('etag');
    const lastModified = response.headers.get('last-modified');
    const [range, total] = (response.headers.get('content-range') ?? '').replace('bytes ', '').split('/');
    if (this.etag && etag && !sameEtag(etag, this.etag)) throw sourceChanged(this.name, `ETag ${etag}, opened as ${this.etag}`);
    if (this.lastModified && lastModified && lastModified !== this.lastModified) {
      throw sourceChanged(this.name, `Last-Modified ${lastModified}, opened as ${this.lastModified}`);
    }
    if (total && total !== '*' && Number(total) !== this.size) throw sourceChanged(this.name, `${total} bytes, opened with ${this.size}`);
    if (range && Number(range.split('-')[0]) !== start) {
      throw new ObjectSourceError(`${this.name}: asked for byte ${start}, server sent range ${range}`, { code: 'bad_response' });
    }
  }

  // A ranged GET answered otherwise than 206: 412 (a condition failed) and a 200 after If-Range
  // with another ETag mean another version of the object; a 200 with the same one, a server that
  // ignores Range.
  #notARange(response) {
    if (response.status === 412) return sourceChanged(this.name, `HTTP 412 to ${isStrong(this.etag) ? `If-Match ${this.etag}` : `If-Unmodified-Since ${this.lastModified}`}`, { status: 412 });
    if (!response.ok) return statusError(this.name, response);
    const etag = response.headers.get('etag');
    if (isStrong(this.etag) && etag !== null && !sameEtag(etag, this.etag)) {
      return sourceChanged(this.name, `HTTP ${response.status} with ETag ${etag} to If-Range ${this.etag}`, { status: response.status });
    }
    return this.#rangeError(response);
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
