// A model file on local disk, behind the object-source interface the host reads through:
// { name, size, read(start, end) -> Uint8Array, readInto(start, end, target) }.
import { open } from 'node:fs/promises';

export class LocalFileSource {
  /** @example const source = await LocalFileSource.open('models/tiny.gguf'); */
  static async open(path) {
    const handle = await open(path, 'r');
    const { size } = await handle.stat();
    return new LocalFileSource(path, handle, size);
  }

  constructor(path, handle, size) {
    this.name = path;
    this.handle = handle;
    this.size = size;
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
      if (bytesRead === 0) throw new Error(`${this.name}: file ended at byte ${start + done}, expected ${end}`);
      done += bytesRead;
    }
  }

  async close() {
    await this.handle.close();
  }
}
