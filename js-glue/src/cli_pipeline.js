// Opening the pipeline for a CLI command: progress bars while weights load, a disk cache for
// remote models (by default under the layerfold cache directory), and the bearer token for
// remote layer nodes from the environment (AUTH_TOKEN), never from the command line.
import path from 'node:path';

import { loadProgress } from './cli_progress.js';
import { cacheDir } from './default_model.js';
import { Pipeline } from './pipeline.js';

// --truncated-attention [--truncation-threshold T] -> the pipeline's approximate modes.
function approxOptions(options) {
  if (!options['truncated-attention']) {
    if (options['truncation-threshold'] !== undefined) throw new Error('--truncation-threshold needs --truncated-attention');
    return {};
  }
  const approx = { truncatedAttention: true };
  if (options['truncation-threshold'] !== undefined) {
    const threshold = Number(options['truncation-threshold']);
    if (!(threshold >= 0 && threshold <= 1)) throw new Error(`--truncation-threshold ${options['truncation-threshold']}: expected a number from 0 to 1`);
    approx.truncationThreshold = threshold;
  }
  return approx;
}

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
      approx: approxOptions(options),
    });
  } finally {
    progress.stop();
  }
}
