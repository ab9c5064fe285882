// A verified local disk cache in front of any object source. Each range read is one piece,
// keyed by the object's identity (etag, or size+mtime for files) and the byte range, stored
// with the sha256 taken at write time and checked on every read. The object's size and identity
// are remembered too, so a restart serves cached ranges without opening the remote source.
//
// The cache never mixes versions: when a missing range sends it to the source, the source must
// still be the object cached (same identity and, without a strong ETag, the same bytes at the
// probe: the sha256 of the first range fetched, kept beside the pieces), else the cached copy is
// dropped and the load fails with 'source_changed'. And a cache is never why a load fails: an
// entry that does not verify is dropped and fetched again, a piece that cannot be written (a full
// disk, a read-only folder) is not stored and the rest of the load goes uncached, and a folder
// that cannot be made leaves the load without a cache; each is said through onWarning.
//
// `pull()` keeps the whole object beside the pieces instead (whole_object.js): a range that is no
// piece is then read from it, checked by its blocks' hashes.
import { createHash, randomBytes } from 'node:crypto';
import * as fsPromises from 'node:fs/promises';
import path from 'node:path';
import { sourceChanged, warnOnStderr } from './http.js';
import { pullWhole, WholeObject } from './whole_object.js';

const { open, readdir, readFile, rm, stat, unlink, utimes } = fsPromises;

const sha256 = (data) => createHash('sha256').update(data).digest('hex');

// The version part of an identity ("name#etag" -> "etag"): messages name the object once, and
// never repeat a URL's query string.
const version = (identity) => identity.slice(identity.lastIndexOf('#') + 1);

// The probe: at most this many bytes at the start of the first range fetched.
const PROBE_BYTES = 64 * 1024;

async function discard(...files) {
  await Promise.all(files.map((f) => unlink(f).catch(() => {})));
}

// An entry as written: its fields and their sha256, so a torn or edited file (bad JSON, a wrong
// size) is seen before it is trusted.
function sealEntry(meta) {
  return JSON.stringify({ ...meta, sha256: sha256(JSON.stringify(meta)) });
}

// -> the entry's fields, or a string saying why the file cannot be trusted.
function unsealEntry(text) {
  let sealed;
  try {
    sealed = JSON.parse(text);
  } catch (error) {
    return `not JSON: ${error.message}`;
  }
  const { sha256: seal, ...meta } = sealed ?? {};
  if (seal !== sha256(JSON.stringify(meta))) return 'its checksum does not match its fields';
  if (typeof meta.name !== 'string' || typeof meta.identity !== 'string' || !Number.isSafeInteger(meta.size) || meta.size < 0) {
    return 'fields missing or of the wrong type';
  }
  return meta;
}

export class CachedSource {
  /**
   * openInner() opens the real source, only when a range is missing (or to revalidate).
   * maxBytes bounds the pieces on disk, evicting the least recently used. revalidate: check the
   * remote identity on open instead of trusting the remembered one. onWarning(message) hears
   * what the cache dropped or could not store (default: a line on stderr). io: the fs/promises
   * functions that write (writeFile, rename, mkdir), replaceable to simulate a full disk.
   * @param {string} name the object's URL or path
   * @param {() => Promise<object>} openInner
   * @param {{cacheDir: string, maxBytes?: number, revalidate?: boolean,
   *          onWarning?: (message: string) => void, io?: object}} options
   * @returns {Promise<object>} the cached source, or the inner one when the folder cannot be made
   * @example const source = await CachedSource.open(url, () => HttpSource.open(url), { cacheDir: '.cache', maxBytes: 8e9 });
   */
  static async open(name, openInner, { cacheDir, maxBytes = Infinity, revalidate = false, onWarning = warnOnStderr, io = fsPromises }) {
    const objectsDir = path.join(cacheDir, 'objects');
    try {
      await io.mkdir(objectsDir, { recursive: true });
    } catch (error) {
      onWarning(`cache ${cacheDir} cannot be used (${error.code ?? error.message}): loading ${name} without it`);
      return openInner();
    }
    const entryFile = path.join(objectsDir, `${sha256(name).slice(0, 32)}.json`);
    const remembered = await CachedSource.#readEntry(entryFile, name, onWarning);
    const context = { cacheDir, entryFile, openInner, maxBytes, onWarning, io };
    if (remembered && !revalidate) return new CachedSource(context, remembered, null);

    const inner = await openInner();
    const meta = { name, size: inner.size, identity: inner.identity, validator: inner.validator ?? 'size' };
    const source = new CachedSource(context, meta, inner);
    try {
      if (remembered && remembered.identity !== meta.identity) await source.#dropPieces(remembered.identity);
      // Pieces kept under this identity by an earlier entry: the same bytes, unless the identity
      // is too weak to tell (no strong ETag), which the probe then tells.
      const why = await source.#differsAtProbe(inner);
      if (why) {
        onWarning(`${name}: the pieces cached as ${version(meta.identity)} are of another version (${why}): dropped`);
        await source.#dropPieces(meta.identity);
      }
      await source.#write(entryFile, sealEntry(meta), 'its entry');
    } catch (error) {
      await inner.close();
      throw error;
    }
    return source;
  }

  // The remembered entry for name, or null; one that does not verify is deleted.
  static async #readEntry(entryFile, name, onWarning) {
    const text = await readFile(entryFile, 'utf8').catch(() => null);
    if (text === null) return null;
    const meta = unsealEntry(text);
    if (typeof meta === 'string') {
      onWarning(`cache entry ${entryFile} for ${name} is unreadable (${meta}): dropped, ${name} is opened again`);
      await discard(entryFile);
      return null;
    }
    // Another name with the same hash prefix: not ours, and overwritten.
    return meta.name === name ? meta : null;
  }

  #context;
  #piecesDir;
  #inner;
  #opening = null;
  #storing = true;
  #probeStored = false;
  #whole = null;

  constructor(context, { name, size, identity, validator }, inner) {
    this.#context = context;
    this.#piecesDir = this.#piecesDirOf(identity);
    this.#inner = inner;
    this.name = name;
    this.size = size;
    this.identity = identity;
    /** What the source checks each range against (http.js), as when the entry was made. */
    this.validator = validator ?? 'size';
    /**
     * hits / misses; pieces found corrupt or partial and fetched again (discarded); ranges
     * read but not stored, after a write failed (unstored).
     */
    this.stats = { hits: 0, misses: 0, discarded: 0, unstored: 0 };
  }

  #piecesDirOf(identity) {
    return path.join(this.#context.cacheDir, 'pieces', sha256(identity).slice(0, 32));
  }

  async read(start, end) {
    const out = new Uint8Array(end - start);
    await this.readInto(start, end, out);
    return out;
  }

  async readInto(start, end, target) {
    const piece = path.join(this.#piecesDir, `${start}-${end}`);
    if (await this.#readPiece(piece, end - start, target) || await this.#readWhole(start, end, target)) {
      this.stats.hits++;
      return;
    }
    this.stats.misses++;
    const inner = this.#inner ?? await (this.#opening ??= this.#openSame());
    await inner.readInto(start, end, target);
    await this.#store(piece, target.subarray(0, end - start), start);
  }

  /**
   * Downloads the whole object into the cache, continuing a pull cut short, and checks it against
   * the source's sha256 when it gives one (whole_object.js); a load then reads any range from it.
   * -> {whole: {size, sha256}, resumedAt, fetchedBytes}, fetchedBytes 0 when it was there already.
   * @example const { whole } = await (await openSource(url, { cacheDir, revalidate: true })).pull({ onProgress: console.log });
   */
  async pull({ onProgress, chunkBytes } = {}) {
    const kept = await WholeObject.find(this.#piecesDir, this.size);
    if (kept) return { whole: kept, resumedAt: this.size, fetchedBytes: 0 };
    const inner = this.#inner ?? await (this.#opening ??= this.#openSame());
    await this.#context.io.mkdir(this.#piecesDir, { recursive: true });
    const pulled = await pullWhole(this.#piecesDir, inner, { onProgress, chunkBytes });
    this.#whole = Promise.resolve(pulled.whole);
    return pulled;
  }

  // True when a pulled whole object holds the range and its blocks check; one that does not is
  // deleted, and the range is fetched again.
  async #readWhole(start, end, target) {
    const whole = await (this.#whole ??= WholeObject.find(this.#piecesDir, this.size));
    if (!whole) return false;
    if (await whole.readInto(start, end, target)) return true;
    this.stats.discarded++;
    this.#whole = Promise.resolve(null);
    await whole.discard();
    return false;
  }

  // The source opened for a missing range: it must be the object cached, since ranges of it may
  // have been served already. If not, the cached copy is dropped and the load fails.
  async #openSame() {
    const inner = await this.#context.openInner();
    const why = inner.identity !== this.identity ? `now ${version(inner.identity)}, cached as ${version(this.identity)}` : await this.#differsAtProbe(inner);
    if (!why) {
      this.#inner = inner;
      return inner;
    }
    await inner.close();
    this.#context.onWarning(`${this.name} changed since it was cached (${why}): the cached copy is dropped`);
    await discard(this.#context.entryFile);
    await this.#dropPieces(this.identity);
    throw sourceChanged(this.name, `${why}; the cached copy was dropped, so opening it again loads the new version`, { staleCache: true });
  }

  // Why inner's bytes at the probe are not the ones cached, or null (no probe, or a strong
  // ETag, which already names the bytes).
  async #differsAtProbe(inner) {
    if (inner.validator === 'etag') return null;
    const text = await readFile(path.join(this.#piecesDir, 'probe.json'), 'utf8').catch(() => null);
    if (text === null) return null;
    let probe;
    try {
      probe = JSON.parse(text);
    } catch {
      return 'its probe is unreadable';
    }
    if (!(Number.isSafeInteger(probe.start) && probe.end > probe.start && probe.end <= inner.size)) return 'its probe is out of range';
    const now = sha256(await inner.read(probe.start, probe.end));
    return now === probe.sha256 ? null : `bytes [${probe.start}, ${probe.end}) have sha256 ${now.slice(0, 16)}..., cached ${String(probe.sha256).slice(0, 16)}...`;
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
      } catch {
        good = false;
      } finally {
        await handle.close();
      }
    }
    if (!good) {
      this.stats.discarded++;
      await discard(`${piece}.bin`, `${piece}.sha256`);
      return false;
    }
    // The piece's mtime is its last use, for eviction; a read-only cache keeps the old one.
    const now = new Date();
    await utimes(`${piece}.bin`, now, now).catch(() => {});
    return true;
  }

  // Stores a fetched range (and, for the first, the probe). A write that fails leaves no piece
  // or temporary file behind and stops storing for the rest of this source's reads.
  async #store(piece, bytes, start) {
    if (!this.#storing) {
      this.stats.unstored++;
      return;
    }
    const what = `bytes [${start}, ${start + bytes.length})`;
    try {
      await this.#context.io.mkdir(this.#piecesDir, { recursive: true });
    } catch (error) {
      this.#stopStoring(error, what);
      return;
    }
    const probeFile = path.join(this.#piecesDir, 'probe.json');
    if (!this.#probeStored && !(await stat(probeFile).catch(() => null))) {
      const probe = { start, end: start + Math.min(bytes.length, PROBE_BYTES), sha256: sha256(bytes.subarray(0, PROBE_BYTES)) };
      if (!(await this.#write(probeFile, JSON.stringify(probe), 'its probe'))) return;
    }
    this.#probeStored = true;
    if (!(await this.#write(`${piece}.sha256`, sha256(bytes), what))) return;
    if (!(await this.#write(`${piece}.bin`, bytes, what))) {
      await discard(`${piece}.sha256`);
      return;
    }
    await this.#evict().catch(() => {});
  }

  // Writes file through a temporary one renamed over it; -> false (and storing stops) on failure.
  async #write(file, data, what) {
    if (!this.#storing) return false;
    const { io } = this.#context;
    const temp = `${file}.${randomBytes(6).toString('hex')}.tmp`;
    try {
      await io.writeFile(temp, data);
      await io.rename(temp, file);
      return true;
    } catch (error) {
      await discard(temp);
      this.#stopStoring(error, what);
      return false;
    }
  }

  #stopStoring(error, what) {
    this.#storing = false;
    this.stats.unstored++;
    this.#context.onWarning(`cache ${this.#context.cacheDir}: cannot store ${what} of ${this.name} (${error.code ?? error.message}): the rest of this load is not cached`);
  }

  async #dropPieces(identity) {
    await rm(this.#piecesDirOf(identity), { recursive: true, force: true }).catch(() => {});
  }

  // Least recently used first (a hit touches the piece's mtime) until under maxBytes.
  async #evict() {
    if (!Number.isFinite(this.#context.maxBytes)) return;
    const root = path.join(this.#context.cacheDir, 'pieces');
    const pieces = [];
    for (const dir of await readdir(root)) {
      for (const file of await readdir(path.join(root, dir)).catch(() => [])) {
        if (!file.endsWith('.bin')) continue;
        const full = path.join(root, dir, file);
        const info = await stat(full).catch(() => null);
        if (info) pieces.push({ full, size: info.size, used: info.mtimeMs });
      }
    }
    pieces.sort((a, b) => a.used - b.used);
    let total = pieces.reduce((sum, p) => sum + p.size, 0);
    for (const piece of pieces) {
      if (total <= this.#context.maxBytes) break;
      await discard(piece.full, piece.full.replace(/\.bin$/, '.sha256'));
      total -= piece.size;
    }
  }

  async close() {
    await this.#inner?.close();
  }
}
