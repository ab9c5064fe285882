// A projector GGUF ("mmproj") read into WASM memory once for the towers it holds (Gemma 4's vision
// tower, and on E2B/E4B its audio encoder): the header parsed and the tensor data copied, which
// each tower's engine object keeps views into.
import { openGgufHeader } from './header.js';

/**
 * `source` ({name, size, read, readInto, close}, closed before this returns) read: {name, gguf,
 * header, data, bytes}: gguf the parsed header (lf_gguf_free it once the towers are made), header
 * its JSON (metadata, tensors), data the tensors' copy (lf.free it after every tower made from it).
 * @example const projector = await readProjectorData(lf, source);
 */
export async function readProjectorData(lf, source) {
  let gguf = 0;
  try {
    const opened = await openGgufHeader(lf, source);
    gguf = opened.gguf;
    const { data_offset: start, file_size: end } = opened.header;
    const bytes = end - start;
    const data = lf.alloc(Math.max(bytes, 4));
    try {
      await source.readInto(start, end, lf.bytes().subarray(data, data + bytes));
    } catch (error) {
      lf.free(data);
      throw error;
    }
    return { name: source.name, gguf, header: opened.header, data, bytes };
  } catch (error) {
    if (gguf) lf.fn.lf_gguf_free(gguf);
    error.message = `projector ${source.name}: ${error.message}`;
    throw error;
  } finally {
    await source.close();
  }
}

/**
 * The engine object `create(gguf, data, bytes)` makes of a read projector (an lf_vision*,
 * lf_audio*): its pointer, or the engine's refusal after the projector's name.
 * @example const ptr = towerOf(lf, projector, (g, d, n) => lf.fn.lf_audio_create(g, d, n, 2));
 */
export function towerOf(lf, projector, create) {
  const ptr = create(projector.gguf, projector.data, projector.bytes);
  if (ptr) return ptr;
  const error = lf.lastError();
  error.message = `projector ${projector.name}: ${error.message}`;
  throw error;
}

/**
 * A tower opened alone from its source: read, made by `create` (as towerOf), the header freed;
 * -> {ptr, data, bytes}, data the copy the caller frees after the tower.
 * @example const { ptr, data } = await readProjector(lf, source, (g, d, n) => lf.fn.lf_vision_create(g, d, n, 1));
 */
export async function readProjector(lf, source, create) {
  const projector = await readProjectorData(lf, source);
  try {
    return { ptr: towerOf(lf, projector, create), data: projector.data, bytes: projector.bytes };
  } catch (error) {
    lf.free(projector.data);
    throw error;
  } finally {
    lf.fn.lf_gguf_free(projector.gguf);
  }
}
