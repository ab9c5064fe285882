// A whole object in the disk cache, as `layerfold pull` leaves it beside the pieces of its
// version: its bytes in one file (whole.bin) and the sha256 of each BLOCK_BYTES block
// (whole.json), so a load's ranges, whatever they are, are served from it and each is checked by
// the blocks it touches. A pull writes whole.partial in order and a pull cut short continues it
// from its last whole block; when the source knows the object's sha256 (the hub's ETag of an
// LFS file), the object is kept only if its bytes have it.
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { open, readFile, rename, stat, unlink, utimes, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ObjectSourceError } from './http.js';
import { withProgress } from './progress.js';

/** The bytes each hash covers: a read checks at most two blocks beyond the range it asks for. */
export const BLOCK_BYTES = 1 << 20;
// A pull's ranges: one request each, whole blocks, and the most a pull cut short loses.
const CHUNK_BYTES = 64 * BLOCK_BYTES;

const sha256 = (data) => createHash('sha256').update(data).digest('hex');
const files = (dir) => ({ bin: path.join(dir, 'whole.bin'), json: path.join(dir, 'whole.json'), partial: path.join(dir, 'whole.partial') });

// Reads [at, at + view.length) of the file into view; -> false when the file ends first.
async function readFully(handle, view, at) {
  let done = 0;
  while (done < view.length) {
    const { bytesRead } = await handle.read(view, done, view.length - done, at + done);
    if (bytesRead === 0) return false;
    done += bytesRead;
  }
  return true;
}

async function writeFully(handle, view, at) {
  let done = 0;
  while (done < view.length) done += (await handle.write(view, done, view.length - done, at + done)).bytesWritten;
}

export class WholeObject {
  /**
   * The whole object of `size` bytes kept in dir, or null (none, or one whose description does
   * not fit: its blocks are then checked against nothing and it is not used).
   * @example const whole = await WholeObject.find(piecesDir, source.size);
   */
  static async find(dir, size) {
    const { bin, json } = files(dir);
    let about;
    try {
      about = JSON.parse(await readFile(json, 'utf8'));
    } catch {
      return null;
    }
    const blocks = Math.ceil(size / BLOCK_BYTES);
    const fits = about?.size === size && about.blockBytes === BLOCK_BYTES && Array.isArray(about.blocks) &&
      about.blocks.length === blocks && about.blocks.every((h) => /^[0-9a-f]{64}$/.test(h));
    const kept = fits ? await stat(bin).catch(() => null) : null;
    return kept?.size === size ? new WholeObject(dir, about) : null;
  }

  #dir;
  #blocks;

  constructor(dir, { size, blocks, sha256: whole }) {
    this.#dir = dir;
    this.#blocks = blocks;
    this.size = size;
    /** The sha256 of the whole object. */
    this.sha256 = whole;
  }

  /**
   * Fills target with bytes [start, end), each block they touch checked against its hash;
   * -> false when one does not match (or the file is gone): the object is then not to be used.
   */
  async readInto(start, end, target) {
    if (end <= start) return true;
    const { bin } = files(this.#dir);
    const handle = await open(bin, 'r').catch(() => null);
    if (!handle) return false;
    try {
      let scratch = null;
      for (let block = Math.floor(start / BLOCK_BYTES); block * BLOCK_BYTES < end; block++) {
        const blockStart = block * BLOCK_BYTES;
        const blockEnd = Math.min(blockStart + BLOCK_BYTES, this.size);
        // A block inside the range is read in place; one at an edge, beside it.
        const inside = blockStart >= start && blockEnd <= end;
        const view = inside ? target.subarray(blockStart - start, blockEnd - start) : (scratch ??= new Uint8Array(BLOCK_BYTES)).subarray(0, blockEnd - blockStart);
        if (!(await readFully(handle, view, blockStart)) || sha256(view) !== this.#blocks[block]) return false;
        if (!inside) {
          const from = Math.max(start, blockStart);
          target.set(view.subarray(from - blockStart, Math.min(end, blockEnd) - blockStart), from - start);
        }
      }
    } catch {
      return false;
    } finally {
      await handle.close();
    }
    // Its mtime is its last use, for the cache's eviction.
    const now = new Date();
    await utimes(bin, now, now).catch(() => {});
    return true;
  }

  /** Deletes the object's files (one found corrupt). */
  async discard() {
    const { bin, json } = files(this.#dir);
    await Promise.all([bin, json].map((f) => unlink(f).catch(() => {})));
  }
}

/**
 * Reads all of source into dir as a whole object, continuing whole.partial from its last whole
 * block; onProgress hears {bytes, totalBytes, rate, etaSeconds}, the bytes kept from before
 * counted as done. -> {whole, resumedAt, fetchedBytes}. The source's sha256, when it has one, must
 * be the bytes' ('checksum_mismatch' otherwise, the partial dropped).
 * @example const { whole } = await pullWhole(piecesDir, source, { onProgress: (p) => bar.update(p.bytes) });
 */
export async function pullWhole(dir, source, { onProgress = () => {}, chunkBytes = CHUNK_BYTES } = {}) {
  const { bin, json, partial } = files(dir);
  const step = Math.max(1, Math.round(chunkBytes / BLOCK_BYTES)) * BLOCK_BYTES;
  const handle = await open(partial, constants.O_RDWR | constants.O_CREAT);
  const blocks = [];
  const whole = createHash('sha256');
  const buffer = new Uint8Array(Math.min(step, Math.max(source.size, 1)));
  const take = (view) => {
    for (let at = 0; at < view.length; at += BLOCK_BYTES) blocks.push(sha256(view.subarray(at, at + BLOCK_BYTES)));
    whole.update(view);
  };
  let resumedAt;
  try {
    // What a pull cut short wrote: its whole blocks, hashed again, are kept.
    resumedAt = Math.min(Math.floor((await handle.stat()).size / BLOCK_BYTES) * BLOCK_BYTES, source.size);
    await handle.truncate(resumedAt);
    for (let at = 0; at < resumedAt; at += step) {
      const view = buffer.subarray(0, Math.min(step, resumedAt - at));
      await readFully(handle, view, at);
      take(view);
    }
    const tracked = withProgress(source, onProgress, { doneBytes: resumedAt });
    for (let at = resumedAt; at < source.size; at += step) {
      const view = buffer.subarray(0, Math.min(step, source.size - at));
      await tracked.readInto(at, at + view.length, view);
      await writeFully(handle, view, at);
      take(view);
    }
    await handle.sync();
  } finally {
    await handle.close();
  }
  const digest = whole.digest('hex');
  if (source.sha256 && digest !== source.sha256) {
    await unlink(partial).catch(() => {});
    throw new ObjectSourceError(`${source.name}: the bytes pulled have sha256 ${digest}, the source gives ${source.sha256}: dropped`, { code: 'checksum_mismatch' });
  }
  const about = { size: source.size, blockBytes: BLOCK_BYTES, sha256: digest, blocks };
  await writeFile(`${json}.tmp`, JSON.stringify(about));
  await rename(`${json}.tmp`, json);
  await rename(partial, bin);
  return { whole: new WholeObject(dir, about), resumedAt, fetchedBytes: source.size - resumedAt };
}
