// Prometheus metrics of a layer-node process (prom-client), fed by the app's observer hooks and
// read from the node at scrape time.
import client from 'prom-client';

/**
 * A registry of the node's metrics and the observer hooks that feed it; `state` is the
 * NodeState read at scrape time for sessions, KV bytes, memory and load progress; inFlight()
 * counts the HTTP requests being served.
 * @example const { observer } = nodeMetrics(state, () => 0); createLayerNodeApp({ state, observer });
 */
export function nodeMetrics(state, inFlight) {
  const registry = new client.Registry();
  client.collectDefaultMetrics({ register: registry });
  const registers = [registry];
  const latency = new client.Histogram({
    name: 'layerfold_http_request_duration_seconds', help: 'HTTP request latency by method, route template and status',
    labelNames: ['method', 'route', 'status'], buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60], registers,
  });
  const tokens = new client.Counter({ name: 'layerfold_tokens_processed_total', help: 'Positions run through this node\'s layers', registers });
  const layerTime = new client.Histogram({
    name: 'layerfold_layer_duration_seconds', help: 'Time per layer per forward, by layer index',
    labelNames: ['layer'], buckets: [0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5], registers,
  });
  // Continuous batching (docs/batching.md): how full each engine step of forwards was, and how
  // long a forward waited for the step it ran in.
  const batchEntries = new client.Histogram({
    name: 'layerfold_batch_entries', help: 'Forward calls (sessions) per engine step',
    buckets: [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64], registers,
  });
  const batchRows = new client.Histogram({
    name: 'layerfold_batch_rows', help: 'Rows (positions) per engine step of forward calls',
    buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048], registers,
  });
  const queueWait = new client.Histogram({
    name: 'layerfold_forward_queue_wait_seconds', help: 'Per forward call: time from reaching the node to its engine step starting',
    buckets: [0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30], registers,
  });
  const errors = new client.Counter({ name: 'layerfold_errors_total', help: 'Error responses by stable code', labelNames: ['code'], registers });
  const fromNode = (name, help, read) => new client.Gauge({
    name, help, registers,
    collect() {
      this.set(state.node ? read(state.node.info()) : 0);
    },
  });
  fromNode('layerfold_sessions', 'Sessions holding a KV cache', (i) => i.sessions);
  fromNode('layerfold_kv_cache_bytes', 'Bytes of all KV caches', (i) => i.kvBytes);
  fromNode('layerfold_wasm_memory_bytes', 'Bytes of WASM memory (weights, KV caches, buffers)', (i) => i.wasmMemoryBytes);
  new client.Gauge({
    name: 'layerfold_load_bytes', help: 'Bytes of its tensors this node has read while loading', registers,
    collect() { this.set(state.progress.bytes); },
  });
  new client.Gauge({
    name: 'layerfold_load_total_bytes', help: 'Bytes of the tensors this node loads', registers,
    collect() { this.set(state.progress.totalBytes); },
  });
  new client.Gauge({
    name: 'layerfold_http_requests_in_flight', help: 'HTTP requests being served (this scrape included)', registers,
    collect() { this.set(inFlight()); },
  });
  new client.Gauge({
    name: 'layerfold_ready', help: '1 once the weights are loaded and the node takes requests', registers,
    collect() { this.set(state.ready ? 1 : 0); },
  });

  const observer = {
    request(method, route, status, ms) {
      latency.observe({ method, route, status: String(status) }, ms / 1000);
    },
    tokens(n) {
      tokens.inc(n);
    },
    layers(first, msPerLayer) {
      msPerLayer.forEach((ms, i) => layerTime.observe({ layer: String(first + i) }, ms / 1000));
    },
    batch({ entries, rows, waitMs }) {
      batchEntries.observe(entries);
      batchRows.observe(rows);
      for (const ms of waitMs) queueWait.observe(ms / 1000);
    },
    error(code) {
      errors.inc({ code });
    },
    async metrics() {
      return { contentType: registry.contentType, text: await registry.metrics() };
    },
  };
  return { registry, observer };
}
