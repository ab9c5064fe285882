// layerfold pull URL: the whole model file into the disk cache a later command reads it through
// (--cache-dir, else the layerfold cache's), with a progress bar on a terminal. A pull cut short
// continues where it stopped; a file the hub gives a sha256 for is kept only with that sha256;
// the URL is asked again each time, so a file changed since is pulled anew, never mixed.
import { redactUrl } from '../log/redact.js';
import { isRemote, openSource } from '../sources/open_source.js';
import { modelCacheDir } from './open_pipeline.js';
import { ALLOW_UNVALIDATED_SOURCE, CACHE_DIR, JSON_OUTPUT } from './options/shared.js';
import { loadProgress } from './progress.js';

const MB = 2 ** 20;

export const PULL_OPTIONS = {
  'cache-dir': { ...CACHE_DIR, shown: 'objects/ under the layerfold cache directory' },
  'allow-unvalidated-source': ALLOW_UNVALIDATED_SOURCE,
  json: JSON_OUTPUT,
};

export async function pull(options, [model, ...extra]) {
  if (!model || extra.length > 0) throw new Error('pull takes one model URL');
  if (!isRemote(model)) throw new Error(`${model}: pull takes an hf://, http(s)://, s3:// or r2:// URL (a local file is read where it is)`);
  const cacheDir = modelCacheDir(model, options);
  const source = await openSource(model, {
    cacheDir, revalidate: true, allowUnvalidatedSource: options['allow-unvalidated-source'],
  });
  try {
    // The cache folder could not be made (openSource said why): there is nowhere to pull to.
    if (typeof source.pull !== 'function') throw new Error(`${redactUrl(model)}: nothing pulled, the cache ${cacheDir} cannot be used`);
    const progress = loadProgress({ quiet: options.json, label: () => 'pull' });
    let pulled;
    try {
      pulled = await source.pull({ onProgress: progress.onProgress && ((p) => progress.onProgress(p, model)) });
    } finally {
      progress.stop();
    }
    const { whole, resumedAt, fetchedBytes } = pulled;
    if (options.json) {
      console.log(JSON.stringify({ model: redactUrl(model), bytes: whole.size, sha256: whole.sha256, cache_dir: cacheDir, resumed_at: resumedAt, fetched_bytes: fetchedBytes }));
    } else {
      const how = fetchedBytes === 0 ? 'already in the cache' : resumedAt > 0 ? `resumed at ${(resumedAt / MB).toFixed(1)} MiB` : 'downloaded';
      console.log(`${redactUrl(model)}: ${(whole.size / MB).toFixed(1)} MiB, sha256 ${whole.sha256}, ${how} (${cacheDir})`);
    }
  } finally {
    await source.close();
  }
  return 0;
}
