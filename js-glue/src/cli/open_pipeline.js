// Opening the pipeline for a CLI command: progress bars while weights load, a disk cache for
// remote models (by default under the layerfold cache directory), and the bearer token for
// remote layer nodes from the environment (AUTH_TOKEN), never from the command line.
import path from 'node:path';

import { loadProgress } from './progress.js';
import { cacheDir } from './default_model.js';
import { Pipeline } from '../pipeline/pipeline.js';
import { isRemote } from '../sources/open_source.js';

/** The disk cache a command reads MODEL through: --cache-dir, else the layerfold cache's for a remote model. */
export function modelCacheDir(model, options) {
  return options['cache-dir'] ?? (isRemote(model) ? path.join(cacheDir(), 'objects') : undefined);
}

/**
 * The pipeline of `model` as the command's options (PIPELINE_OPTIONS, read) say, with the
 * approximate modes `approx` (approx.js's approxFromFlags; default every mode off).
 * @example const pipeline = await openPipeline(model, options, approxFromFlags(options));
 */
export async function openPipeline(model, options, approx = {}) {
  const progress = loadProgress({ quiet: options.json });
  try {
    return await Pipeline.open({
      model,
      nodes: options.nodes,
      threads: options.threads,
      build: options.build,
      cacheTypeK: options['cache-type-k'],
      cacheTypeV: options['cache-type-v'],
      maxSpan: options['max-span'],
      cacheDir: modelCacheDir(model, options),
      onProgress: progress.onProgress,
      authToken: process.env.AUTH_TOKEN,
      approx,
      allowUnvalidatedSource: options['allow-unvalidated-source'],
    });
  } finally {
    progress.stop();
  }
}
