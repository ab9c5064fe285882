// Opening the pipeline for a CLI command: progress bars while weights load, a disk cache for
// remote models (by default under the layerfold cache directory), and the bearer token for
// remote layer nodes from the environment (AUTH_TOKEN), never from the command line.
import path from 'node:path';

import { approxFromFlags } from './approx.js';
import { loadProgress } from './progress.js';
import { allowUnvalidatedSource } from './serve.js';
import { cacheDir } from './default_model.js';
import { Pipeline } from '../pipeline/pipeline.js';

export async function openPipeline(model, options) {
  const remote = typeof model === 'string' && /^(https?|s3|r2):\/\//.test(model);
  const progress = loadProgress({ quiet: options.json });
  try {
    return await Pipeline.open({
      model,
      nodes: options.nodes,
      threads: options.threads && Number(options.threads),
      build: options.build,
      cacheDir: options['cache-dir'] ?? (remote ? path.join(cacheDir(), 'objects') : undefined),
      onProgress: progress.onProgress,
      authToken: process.env.AUTH_TOKEN,
      approx: approxFromFlags(options),
      allowUnvalidatedSource: allowUnvalidatedSource(options['allow-unvalidated-source'], process.env),
    });
  } finally {
    progress.stop();
  }
}
