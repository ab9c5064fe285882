// An object behind a Cloudflare Workers R2 binding (env.BUCKET), with the host's object-source
// interface. The binding has no byte-level streaming resume: each read is one ranged get.
import { ObjectSourceError } from './http.js';

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

  async read(start, end) {
    const out = new Uint8Array(end - start);
    await this.readInto(start, end, out);
    return out;
  }

  async readInto(start, end, target) {
    if (end === start) return;
    const object = await this.#bucket.get(this.#key, { range: { offset: start, length: end - start } });
    if (!object) throw new ObjectSourceError(`${this.name}: object vanished while reading`, { code: 'not_found', status: 404 });
    if (this.etag && object.etag && object.etag !== this.etag) {
      throw new ObjectSourceError(`${this.name}: the object changed while reading`, { code: 'changed' });
    }
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
