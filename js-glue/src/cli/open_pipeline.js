// Opening the pipeline for a CLI command: progress bars while weights load, a disk cache for
// remote models (by default under the layerfold cache directory), and the bearer token for
// remote layer nodes from the environment (AUTH_TOKEN), never from the command line.
import path from 'node:path';

import { approxFromFlags } from './approx.js';
import { loadProgress } from './progress.js';
import { allowUnvalidatedSource } from './serve.js';
import { cacheDir } from './default_model.js';
import { Pipeline } from '../pipeline/pipeline.js';
import { isRemote } from '../sources/open_source.js';

/** The disk cache a command reads MODEL through: --cache-dir, else the layerfold cache's for a remote model. */
export function modelCacheDir(model, options) {
  return options['cache-dir'] ?? (isRemote(model) ? path.join(cacheDir(), 'objects') : undefined);
}

export async function openPipeline(model, options) {
  const progress = loadProgress({ quiet: options.json });
  try {
    return await Pipeline.open({
      model,
      nodes: options.nodes,
      threads: options.threads && Number(options.threads),
      build: options.build,
      cacheDir: modelCacheDir(model, options),
      onProgress: progress.onProgress,
      authToken: process.env.AUTH_TOKEN,
      approx: approxFromFlags(options),
      allowUnvalidatedSource: allowUnvalidatedSource(options['allow-unvalidated-source'], process.env),
    });
  } finally {
    progress.stop();
  }
}
