// LayerNode in Node: layer_node_core.js plus Node's defaults — the threaded or single-thread
// module from dist/, and a model given as a path or URL (with the disk cache and progress).
import { LayerNode as CoreLayerNode } from './layer_node_core.js';
import { redactSecrets } from '../log/redact.js';
import { LayerfoldError } from '../wasm/capi.js';
import { modelName, openSource } from '../sources/open_source.js';
import { loadSingleThreadModule, loadThreadedModule, threadsAvailable } from '../wasm/load_node.js';

export class LayerNode extends CoreLayerNode {
  /**
   * threads: the engine's threads on the threaded build (default: the machine's parallelism);
   * outputs are byte-identical for every count. The single-thread build always uses one.
   * model: a path, file://, http(s)://, s3:// or r2:// URL, or a Workers R2 binding {bucket, key};
   * cacheDir: a verified disk cache of the ranges read; onProgress: throttled
   * {bytes, totalBytes, rate, etaSeconds} of the load, totalBytes the bytes of the tensors this
   * node reads (its layers' share of the file), the last report at 100%; sourceOptions: more
   * openSource options (retries, S3 endpoint and credentials, maxCacheBytes, progressIntervalMs...).
   * draftModel, on the node holding the head: Gemma 4's MTP drafter of this model (a path, URL or
   * binding as `model`, read through the same cache and source options), loaded beside the head
   * with as many threads of its own (the threaded module gets a pthread for each).
   * dotForm: force the relaxed kernels' form of the Q4_0 dot product, 'dot-add' or 'pairs' (same
   * bits; default: the faster on this machine, timed at load; info().dotForm says which and why).
   * An already loaded module `lf` or opened `source` may be passed instead. The other options
   * (header, maxSessions, maxKvBytes, memoryBudgetBytes, maxTokens, ...) are layer_node_core.js's. allowUnvalidatedSource: load from
   * a server that sends neither ETag nor Last-Modified (refused otherwise; sources/unvalidated.js).
   * @param {{model: string|{bucket: object, key: string}, header?: object, layers?: [number, number], threads?: number,
   *          build?: 'threaded'|'single', maxContext?: number, withTokenizer?: boolean,
   *          cacheDir?: string, onProgress?: (p: object) => void, sourceOptions?: object,
   *          maxSessions?: number, maxKvBytes?: number, memoryBudgetBytes?: number, maxTokens?: number,
   *          lf?: object, source?: object, allowUnvalidatedSource?: boolean, draftModel?: string|{bucket: object, key: string},
   *          dotForm?: 'dot-add'|'pairs'}} options
   * @example const node = await LayerNode.open({ model: 'https://example.com/tiny.gguf', layers: [0, 2], cacheDir: '.cache' });
   */
  static async open(options) {
    try {
      return await this.#openOnce(options);
    } catch (error) {
      // The disk cache held another version of the model and has dropped it (disk_cache.js): a
      // cache must not be why a load fails, so the load starts over from the source, once.
      if (!error.staleCache || options.lf || options.source) throw error;
      return this.#openOnce(options);
    }
  }

  static async #openOnce({ model, threads, build, cacheDir, sourceOptions, allowUnvalidatedSource, lf, source, draftModel, dotForm, ...options }) {
    // The drafter's pool would wait for pthreads the module does not have, for ever.
    if (lf?.kind === 'threaded' && draftModel !== undefined && !lf.withDrafter) {
      lf.close();
      throw new LayerfoldError('invalid_argument', 'a draft model runs on threads of its own: load the module with loadThreadedModule({ withDrafter: true })');
    }
    const useThreads = build ? build === 'threaded' : threadsAvailable();
    const module = lf ?? (useThreads
      ? await loadThreadedModule({ threads, withDrafter: draftModel !== undefined, dotForm })
      : await loadSingleThreadModule({ dotForm }));
    const sourceOf = (name) => openSource(name, { ...sourceOptions, cacheDir, allowUnvalidatedSource });
    let opened;
    let draftSource = null;
    try {
      opened = source ?? await sourceOf(model);
      draftSource = draftModel === undefined ? null : await sourceOf(draftModel);
    } catch (error) {
      if (!source) await opened?.close();
      module.close();
      throw error;
    }
    // The names info() reports travel to logs and answers: never with a URL's credentials.
    return super.open({
      ...options, progressIntervalMs: sourceOptions?.progressIntervalMs, lf: module, source: opened, name: redactSecrets(model === undefined ? opened.name : modelName(model)),
      draftSource, draftName: draftModel === undefined ? undefined : redactSecrets(modelName(draftModel)), drafterThreads: module.threads,
    });
  }
}
