// An object behind a Cloudflare Workers R2 binding (env.BUCKET), with the host's object-source
// interface. The binding has no byte-level streaming resume: each read is one ranged get, on the
// condition that the object still has the etag it was opened with (onlyIf: a failed condition
// returns the object's metadata without a body).
import { ObjectSourceError, sourceChanged } from './http.js';

export class R2BindingSource {
  /**
   * @param {{head: (key: string) => Promise<object|null>, get: (key: string, options: object) => Promise<object|null>}} bucket
   * @param {string} key
   * @example const source = await R2BindingSource.open(env.MODELS, 'gemma-31b.gguf');
   */
  static async open(bucket, key) {
    const head = await bucket.head(key);
    if (!head) throw new ObjectSourceError(`r2 binding: ${key}: no such object`, { code: 'not_found', status: 404 });
    return new R2BindingSource(bucket, key, head.size, head.etag ?? head.httpEtag ?? null);
  }

  #bucket;
  #key;

  constructor(bucket, key, size, etag) {
    this.#bucket = bucket;
    this.#key = key;
    this.name = `r2-binding:${key}`;
    this.size = size;
    this.etag = etag;
  }

  get identity() {
    return `${this.name}#${this.etag ?? this.size}`;
  }

  /** 'etag': every range is asked for with onlyIf.etagMatches (R2 objects always have one). */
  get validator() {
    return this.etag ? 'etag' : 'size';
  }

  async read(start, end) {
    const out = new Uint8Array(end - start);
    await this.readInto(start, end, out);
    return out;
  }

  async readInto(start, end, target) {
    if (end === start) return;
    const onlyIf = this.etag ? { etagMatches: this.etag } : undefined;
    const object = await this.#bucket.get(this.#key, { range: { offset: start, length: end - start }, onlyIf });
    if (!object) throw new ObjectSourceError(`${this.name}: object vanished while reading`, { code: 'not_found', status: 404 });
    if (this.etag && object.etag && object.etag !== this.etag) throw sourceChanged(this.name, `etag ${object.etag}, opened as ${this.etag}`);
    if (!object.body && typeof object.arrayBuffer !== 'function') throw sourceChanged(this.name, `no longer etag ${this.etag}`);
    if (object.size !== undefined && object.size !== this.size) throw sourceChanged(this.name, `${object.size} bytes, opened with ${this.size}`);
    let done = 0;
    const place = (chunk) => {
      if (done + chunk.length > end - start) throw new ObjectSourceError(`${this.name}: binding returned more than the ${end - start} bytes asked for`, { code: 'bad_response' });
      target.set(chunk, done);
      done += chunk.length;
    };
    if (object.body) {
      for await (const chunk of object.body) place(chunk);
    } else {
      place(new Uint8Array(await object.arrayBuffer()));
    }
    if (done !== end - start) {
      throw new ObjectSourceError(`${this.name}: binding returned ${done} bytes at ${start}, expected ${end - start}`, { code: 'truncated' });
    }
  }

  async close() {}
}
