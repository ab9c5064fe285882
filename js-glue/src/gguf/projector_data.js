// A projector GGUF ("mmproj") read into WASM memory for one of its towers: the header parsed and
// the tensor data copied, handed to the engine's constructor of that tower. Vision and audio
// encoders are built the same way from the same file.
import { openGgufHeader } from './header.js';

/**
 * The tower `create(gguf, data, bytes)` makes (an lf_vision*, lf_audio*, ...) from `source`
 * ({name, size, read, readInto, close}, closed before this returns): {ptr, data, bytes}, data the
 * copy of the tensors the tower keeps views into (free it after the tower). Refused with the
 * engine's message after the source's name, nothing left allocated.
 * @example const { ptr, data } = await readProjector(lf, source, (g, d, n) => lf.fn.lf_audio_create(g, d, n, 2));
 */
export async function readProjector(lf, source, create) {
  let gguf = 0;
  let data = 0;
  try {
    const opened = await openGgufHeader(lf, source);
    gguf = opened.gguf;
    const { data_offset: start, file_size: end } = opened.header;
    const bytes = end - start;
    data = lf.alloc(Math.max(bytes, 4));
    await source.readInto(start, end, lf.bytes().subarray(data, data + bytes));
    const ptr = create(gguf, data, bytes);
    if (!ptr) throw lf.lastError();
    return { ptr, data, bytes };
  } catch (error) {
    if (data) lf.free(data);
    error.message = `projector ${source.name}: ${error.message}`;
    throw error;
  } finally {
    if (gguf) lf.fn.lf_gguf_free(gguf);
    await source.close();
  }
}
