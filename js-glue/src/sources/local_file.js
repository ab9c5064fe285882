// A model file on local disk, behind the object-source interface the host reads through:
// { name, size, identity, validator, read(start, end) -> Uint8Array, readInto(start, end, target) }.
// The file is read through one open handle (a file renamed over it is not seen); a file written
// in place during the load changes its size or mtime, which every read checks.
import { open } from 'node:fs/promises';
import path from 'node:path';
import { sourceChanged } from './http.js';

export class LocalFileSource {
  /** @example const source = await LocalFileSource.open('models/tiny.gguf'); */
  static async open(file) {
    const handle = await open(file, 'r');
    try {
      const { size, mtimeMs } = await handle.stat();
      return new LocalFileSource(file, handle, size, mtimeMs);
    } catch (error) {
      await handle.close();
      throw error;
    }
  }

  constructor(file, handle, size, mtimeMs) {
    this.name = file;
    this.handle = handle;
    this.size = size;
    this.mtimeMs = mtimeMs;
    this.identity = `${path.resolve(file)}#${size}:${mtimeMs}`;
    /** Each read is checked against the size and mtime the file was opened with. */
    this.validator = 'mtime';
  }

  async read(start, end) {
    const out = new Uint8Array(end - start);
    await this.readInto(start, end, out);
    return out;
  }

  // Fills target (e.g. a view of WASM memory) with bytes [start, end): no copy in the JS heap.
  async readInto(start, end, target) {
    let done = 0;
    while (done < end - start) {
      const { bytesRead } = await this.handle.read(target, done, end - start - done, start + done);
      if (bytesRead === 0) break;
      done += bytesRead;
    }
    // After the read: a write that raced with it has moved the mtime by now.
    const { size, mtimeMs } = await this.handle.stat();
    if (size !== this.size || mtimeMs !== this.mtimeMs) {
      throw sourceChanged(this.name, `now ${size} bytes, modified ${new Date(mtimeMs).toISOString()}; opened with ${this.size} bytes, modified ${new Date(this.mtimeMs).toISOString()}`);
    }
    if (done < end - start) throw new Error(`${this.name}: file ended at byte ${start + done}, expected ${end}`);
  }

  async close() {
    await this.handle.close();
  }
}
