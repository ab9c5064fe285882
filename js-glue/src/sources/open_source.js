// Picks the object source for a model reference: a local path or file:// URL, an http(s) URL,
// an s3:// or r2:// URL, a file on the Hugging Face hub (hf://), or a Workers R2 binding
// {bucket, key}; optionally behind the disk cache and with progress reports.
import { fileURLToPath } from 'node:url';
import { CachedSource } from './disk_cache.js';
import { openHfSource } from './hf.js';
import { HttpSource, warnOnStderr } from './http.js';
import { LocalFileSource } from './local_file.js';
import { R2BindingSource } from './r2_binding.js';
import { openS3Source } from './s3.js';
import { withProgress } from './progress.js';
import { admitSource } from './unvalidated.js';

/** A printable name for a model reference (an R2 binding shows its key). */
export function modelName(model) {
  return typeof model === 'string' ? model : `r2-binding:${model.key}`;
}

/** True for a model read over the network (http(s)://, s3://, r2://, hf://), which a disk cache can keep. */
export function isRemote(model) {
  return typeof model === 'string' && /^(https?|s3|r2|hf):\/\//i.test(model);
}

function opener(model, options) {
  if (typeof model === 'object' && model !== null && typeof model.bucket?.get === 'function') {
    return () => R2BindingSource.open(model.bucket, model.key);
  }
  if (typeof model !== 'string') throw new TypeError('model: expected a path, a URL or an R2 binding {bucket, key}');
  if (/^https?:\/\//i.test(model)) return () => HttpSource.open(model, options);
  if (/^(s3|r2):\/\//i.test(model)) return () => openS3Source(model, options);
  if (/^hf:\/\//i.test(model)) return () => openHfSource(model, options);
  if (/^file:\/\//i.test(model)) return () => LocalFileSource.open(fileURLToPath(model));
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(model)) throw new TypeError(`${model}: unsupported URL scheme`);
  return () => LocalFileSource.open(model);
}

/**
 * Opens a model reference as an object source { name, size, identity, validator, read, readInto,
 * close }. Options: cacheDir (+ maxCacheBytes, revalidate) for the verified disk cache;
 * onProgress ({bytes, totalBytes, rate, etaSeconds}, throttled to progressIntervalMs);
 * onWarning(message) for what the cache dropped or could not store and for a server that gives
 * no validator (default: a line on stderr); allowUnvalidatedSource: open a server that sends
 * neither ETag nor Last-Modified, refused otherwise (unvalidated.js); the HTTP/S3 retry options (retries, backoffMs,
 * maxBackoffMs, timeoutMs); S3 endpoint and credentials; the hub's hfEndpoint and hfToken
 * (hf.js). cacheIo replaces the cache's write functions (disk_cache.js), for tests.
 * @example const source = await openSource('r2://models/gemma.gguf', { cacheDir: '/var/cache/lf', onProgress: console.log });
 */
export async function openSource(model, { cacheDir, maxCacheBytes, revalidate, cacheIo, onProgress, progressIntervalMs, allowUnvalidatedSource,
  ...options } = {}) {
  // A source without validators is refused as soon as it is opened, before the cache keeps
  // anything of it; a cache entry remembered from before is judged by the validator it recorded.
  let admitted = false;
  const admit = async (opened) => {
    if (admitted) return opened;
    try {
      admitSource(opened, { allow: allowUnvalidatedSource, onWarning: options.onWarning ?? warnOnStderr });
    } catch (error) {
      await opened.close();
      throw error;
    }
    admitted = true;
    return opened;
  };
  const open = async () => admit(await opener(model, options)());
  const source = await admit(cacheDir
    ? await CachedSource.open(modelName(model), open, { cacheDir, maxBytes: maxCacheBytes, revalidate, onWarning: options.onWarning, io: cacheIo })
    : await open());
  return onProgress ? withProgress(source, onProgress, { intervalMs: progressIntervalMs }) : source;
}
