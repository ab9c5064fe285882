// Load progress for any object source: counts the bytes of completed reads and reports
// {bytes, totalBytes, rate, etaSeconds} at most every intervalMs (and always at totalBytes).

/**
 * Wraps source so its reads report progress against totalBytes: by default the object's size,
 * for a read of all of it; a node passes the bytes of the tensors it loads (node/opening.js).
 * doneBytes, bytes already there (a pull resumed), count in bytes but not in the rate.
 * @example const tracked = withProgress(source, (p) => console.log(p.bytes, p.etaSeconds), { intervalMs: 500 });
 */
export function withProgress(source, onProgress, { totalBytes = source.size, doneBytes = 0, intervalMs = 250 } = {}) {
  const started = performance.now();
  let bytes = doneBytes;
  let lastReport = -Infinity;
  const report = (count) => {
    bytes += count;
    const now = performance.now();
    if (now - lastReport < intervalMs && bytes < totalBytes) return;
    lastReport = now;
    const rate = (bytes - doneBytes) / Math.max((now - started) / 1000, 1e-3);
    onProgress({ bytes, totalBytes, rate, etaSeconds: rate > 0 ? Math.max(totalBytes - bytes, 0) / rate : Infinity });
  };
  return {
    name: source.name,
    size: source.size,
    identity: source.identity,
    validator: source.validator,
    async read(start, end) {
      const out = await source.read(start, end);
      report(end - start);
      return out;
    },
    async readInto(start, end, target) {
      await source.readInto(start, end, target);
      report(end - start);
    },
    close: () => source.close(),
    // The source itself, for reads after the load that are not its progress (a first node's
    // per-layer embedding rows, node/per_layer_rows.js).
    untracked: source,
  };
}
