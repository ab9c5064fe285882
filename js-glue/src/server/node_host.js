// A layer node as a Node process (the Cloud Run container): the HTTP app on @hono/node-server,
// listening at once so /healthz and /readyz answer while the weights load in the background;
// Prometheus metrics; one JSON log line per event; and a graceful shutdown that finishes the
// requests in flight.
import { createAdaptorServer } from '@hono/node-server';

import { LayerNode } from '../node/layer_node.js';
import { createLayerNodeApp } from './app.js';
import { jsonLog, redactConfig, redactUrl } from './json_log.js';
import { nodeMetrics } from './metrics.js';
import { NodeState } from './node_state.js';

const PROGRESS_LOG_MS = 2000;

function listen(server, port, host) {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve(server.address().port);
    });
  });
}

/**
 * Serves layers [begin, end) of `model` over HTTP. Returns at once with the listening server;
 * `loaded` settles when the weights are in (or failed to load), `shutdown()` stops accepting,
 * waits up to shutdownTimeoutMs for requests in flight, frees the node and resolves with the
 * number of requests it had to abandon.
 * @param {{model: string, layers?: [number, number], threads?: number, build?: 'threaded'|'single',
 *          port?: number, host?: string, cacheDir?: string, maxSessions?: number, maxKvBytes?: number,
 *          maxContext?: number, maxTokens?: number, maxQueue?: number, authToken?: string,
 *          shutdownTimeoutMs?: number, ffnDownLayout?: 'units'|'features', log?: (severity: string, message: string, fields?: object) => void}} options
 * @example
 * const node = await serve({ model: 'r2://models/gemma-4-31B-q4_0.gguf', layers: [0, 6], port: 8080, authToken: process.env.AUTH_TOKEN });
 * process.once('SIGTERM', async () => process.exit((await node.shutdown()) === 0 ? 0 : 1));
 */
export async function serve({ model, layers, threads, build, port = 8080, host = '0.0.0.0', cacheDir, maxSessions = 64, maxKvBytes,
  maxContext = 0, maxTokens = 2048, maxQueue = 16, authToken, shutdownTimeoutMs = 10_000, ffnDownLayout, log = jsonLog() }) {
  log('INFO', 'starting', {
    config: redactConfig({ model, layers, threads, build, port, host, cacheDir, maxSessions, maxKvBytes, maxContext, maxTokens, maxQueue, authToken, shutdownTimeoutMs, ffnDownLayout }),
    s3Credentials: ['S3_ENDPOINT', 'R2_ENDPOINT', 'AWS_ACCESS_KEY_ID', 'R2_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'R2_SECRET_ACCESS_KEY'].filter((name) => process.env[name]),
  });
  const state = new NodeState();
  // Requests in flight, counted until their response is written out (or the client went away).
  let inFlight = 0;
  let onIdle = () => {};
  const metrics = nodeMetrics(state, () => inFlight);
  const observer = {
    ...metrics.observer,
    request(method, route, status, ms) {
      metrics.observer.request(method, route, status, ms);
      log(status >= 500 ? 'ERROR' : 'INFO', 'request', { method, route, status, ms: Number(ms.toFixed(2)) });
    },
  };
  const app = createLayerNodeApp({ state, authToken, maxTokens, maxQueue, observer });
  const server = createAdaptorServer({ fetch: app.fetch });
  server.on('request', (request, response) => {
    inFlight++;
    response.once('close', () => {
      if (--inFlight === 0) onIdle();
    });
  });
  const boundPort = await listen(server, port, host);
  log('INFO', 'listening', { host, port: boundPort });

  const t0 = performance.now();
  let lastLog = -Infinity;
  const loaded = LayerNode.open({
    model, layers, threads, build, cacheDir, maxSessions, maxKvBytes, maxContext, ffnDownLayout,
    onProgress: (progress) => {
      state.onProgress(progress);
      if (performance.now() - lastLog < PROGRESS_LOG_MS) return;
      lastLog = performance.now();
      log('INFO', 'loading', { bytes: progress.bytes, totalBytes: progress.totalBytes, etaSeconds: Number(progress.etaSeconds.toFixed(1)) });
    },
  }).then((node) => {
    if (state.shuttingDown) {
      node.close();
      return node;
    }
    state.loaded(node);
    const info = node.info();
    log('INFO', 'ready', { model: redactUrl(info.model), layers: info.layers, bytesLoaded: info.bytesLoaded, build: info.build, threads: info.threads, loadSeconds: Number(((performance.now() - t0) / 1000).toFixed(2)) });
    return node;
  }, (error) => {
    log('ERROR', 'load failed', { code: error.code ?? error.name, error: error.message });
    throw error;
  });
  loaded.catch(() => {});  // the caller decides what a failed load means for the process

  async function shutdown() {
    if (state.shuttingDown) return 0;
    state.shuttingDown = true;
    log('INFO', 'shutting down', { inFlight, pendingWork: state.pendingWork, deadlineMs: shutdownTimeoutMs });
    server.close();
    server.closeIdleConnections();
    // Requests in flight, and engine calls whose client may have gone: both finish, or the deadline passes.
    const httpIdle = inFlight === 0 ? Promise.resolve() : new Promise((resolve) => { onIdle = resolve; });
    let timer;
    const deadline = new Promise((resolve) => { timer = setTimeout(resolve, shutdownTimeoutMs); });
    await Promise.race([Promise.all([httpIdle, state.whenIdle()]), deadline]);
    clearTimeout(timer);
    const abandoned = inFlight + state.pendingWork;
    server.closeAllConnections();
    // A forward still running owns the engine: only an idle node is freed (else the exit frees it).
    if (state.pendingWork === 0 && state.node) state.node.close();
    log(abandoned ? 'WARNING' : 'INFO', 'stopped', { abandoned });
    return abandoned;
  }

  return { url: `http://${host.includes(':') ? `[${host}]` : host}:${boundPort}`, port: boundPort, state, app, server, loaded, shutdown };
}
