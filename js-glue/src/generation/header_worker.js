// A worker thread with the model's tokenizer of its own: the parent hands it the header's bytes
// (gguf/header.js ModelHeader), the thread parses them again in a single-thread module of its
// own. The tokenizer and grammar threads are such threads.
import { Worker, workerData } from 'node:worker_threads';

import { reparseModelHeader } from '../gguf/header.js';
import { Tokenizer } from '../tokens/tokenizer.js';
import { loadSingleThreadModule } from '../wasm/load_node.js';

/**
 * Starts the thread of module `url` with `header`'s bytes; it does not keep the process alive.
 * @example const worker = headerWorker(new URL(import.meta.url), pipeline.header);
 */
export function headerWorker(url, header) {
  const worker = new Worker(url, { workerData: { bytes: header.bytes, fileSize: header.file_size } });
  worker.unref();
  return worker;
}

/** In such a thread: whether this is one (its module runs as the thread's entry). */
export const inHeaderWorker = () => workerData?.bytes !== undefined;

/**
 * In such a thread: the tokenizer of the header it was handed.
 * @example const tokenizer = await headerTokenizer();
 */
export async function headerTokenizer() {
  const lf = await loadSingleThreadModule();
  const gguf = reparseModelHeader(lf, { bytes: workerData.bytes, file_size: workerData.fileSize });
  try {
    return Tokenizer.fromGguf(lf, gguf);
  } finally {
    lf.fn.lf_gguf_free(gguf);
  }
}
