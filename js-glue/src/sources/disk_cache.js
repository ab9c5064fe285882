// A verified local disk cache in front of any object source. Each range read is one piece,
// keyed by the object's identity (etag, or size+mtime for files) and the byte range, stored
// with the sha256 taken at write time and checked on every read. The object's size and identity
// are remembered too, so a restart serves cached ranges without opening the remote source.
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, open, readdir, readFile, rename, stat, unlink, utimes, writeFile } from 'node:fs/promises';
import path from 'node:path';

const sha256 = (data) => createHash('sha256').update(data).digest('hex');

async function writeAtomically(file, data) {
  const temp = `${file}.${randomBytes(6).toString('hex')}.tmp`;
  await writeFile(temp, data);
  await rename(temp, file);
}

async function discard(...files) {
  await Promise.all(files.map((f) => unlink(f).catch(() => {})));
}

export class CachedSource {
  /**
   * openInner() opens the real source, only when a range is missing (or to revalidate).
   * maxBytes bounds the pieces on disk, evicting the least recently used. revalidate: check the
   * remote identity on open instead of trusting the remembered one.
   * @param {string} name the object's URL or path
   * @param {() => Promise<object>} openInner
   * @param {{cacheDir: string, maxBytes?: number, revalidate?: boolean}} options
   * @example const source = await CachedSource.open(url, () => HttpSource.open(url), { cacheDir: '.cache', maxBytes: 8e9 });
   */
  static async open(name, openInner, { cacheDir, maxBytes = Infinity, revalidate = false }) {
    const objectsDir = path.join(cacheDir, 'objects');
    await mkdir(objectsDir, { recursive: true });
    const metaFile = path.join(objectsDir, `${sha256(name).slice(0, 32)}.json`);
    const remembered = revalidate ? null : await readFile(metaFile, 'utf8').then(JSON.parse, () => null);
    if (remembered?.name === name) return new CachedSource(cacheDir, remembered, null, openInner, maxBytes);
    const inner = await openInner();
    const meta = { name, size: inner.size, identity: inner.identity };
    await writeAtomically(metaFile, JSON.stringify(meta));
    return new CachedSource(cacheDir, meta, inner, openInner, maxBytes);
  }

  #cacheDir;
  #piecesDir;
  #inner;
  #openInner;
  #maxBytes;

  constructor(cacheDir, { name, size, identity }, inner, openInner, maxBytes) {
    this.#cacheDir = cacheDir;
    this.#piecesDir = path.join(cacheDir, 'pieces', sha256(identity).slice(0, 32));
    this.#inner = inner;
    this.#openInner = openInner;
    this.#maxBytes = maxBytes;
    this.name = name;
    this.size = size;
    this.identity = identity;
    /** hits / misses, and pieces found corrupt or partial and fetched again. */
    this.stats = { hits: 0, misses: 0, discarded: 0 };
  }

  async read(start, end) {
    const out = new Uint8Array(end - start);
    await this.readInto(start, end, out);
    return out;
  }

  async readInto(start, end, target) {
    const piece = path.join(this.#piecesDir, `${start}-${end}`);
    if (await this.#readPiece(piece, end - start, target)) {
      this.stats.hits++;
      return;
    }
    this.stats.misses++;
    this.#inner ??= await this.#openInner();
    if (this.#inner.identity !== this.identity) {
      throw new Error(`${this.name}: the object changed since it was cached (${this.#inner.identity}, cached ${this.identity}); clear ${this.#cacheDir} or open with revalidate`);
    }
    await this.#inner.readInto(start, end, target);
    await mkdir(this.#piecesDir, { recursive: true });
    const bytes = target.subarray(0, end - start);
    await writeAtomically(`${piece}.sha256`, sha256(bytes));
    await writeAtomically(`${piece}.bin`, bytes);
    await this.#evict();
  }

  // True when the piece exists, has the right length and hash; a bad piece is deleted.
  async #readPiece(piece, length, target) {
    const expected = await readFile(`${piece}.sha256`, 'utf8').catch(() => null);
    if (expected === null) return false;
    const handle = await open(`${piece}.bin`, 'r').catch(() => null);
    let good = false;
    if (handle) {
      try {
        const { size } = await handle.stat();
        if (size === length) {
          let done = 0;
          while (done < length) {
            const { bytesRead } = await handle.read(target, done, length - done, done);
            if (bytesRead === 0) break;
            done += bytesRead;
          }
          good = done === length && sha256(target.subarray(0, length)) === expected;
        }
      } finally {
        await handle.close();
      }
    }
    if (!good) {
      this.stats.discarded++;
      await discard(`${piece}.bin`, `${piece}.sha256`);
      return false;
    }
    const now = new Date();
    await utimes(`${piece}.bin`, now, now);
    return true;
  }

  // Least recently used first (a hit touches the piece's mtime) until under maxBytes.
  async #evict() {
    if (!Number.isFinite(this.#maxBytes)) return;
    const root = path.join(this.#cacheDir, 'pieces');
    const pieces = [];
    for (const dir of await readdir(root)) {
      for (const file of await readdir(path.join(root, dir))) {
        if (!file.endsWith('.bin')) continue;
        const full = path.join(root, dir, file);
        const info = await stat(full).catch(() => null);
        if (info) pieces.push({ full, size: info.size, used: info.mtimeMs });
      }
    }
    pieces.sort((a, b) => a.used - b.used);
    let total = pieces.reduce((sum, p) => sum + p.size, 0);
    for (const piece of pieces) {
      if (total <= this.#maxBytes) break;
      await discard(piece.full, piece.full.replace(/\.bin$/, '.sha256'));
      total -= piece.size;
    }
  }

  async close() {
    await this.#inner?.close();
  }
}
