// A layer node as a Node process (the Cloud Run container): the HTTP app on @hono/node-server,
// listening at once so /healthz and /readyz answer while the weights load in the background;
// Prometheus metrics; one log line per event (JSON, or readable on a terminal; redacted); Node's
// server timeouts set for this protocol; and a graceful shutdown that finishes the requests in
// flight. A node without a token answers anyone who reaches it, so it starts on a loopback
// address only, unless told otherwise in so many words.
import { LayerNode } from '../node/layer_node.js';
import { createLayerNodeApp, DEFAULT_BODY_TIMEOUT_MS, DEFAULT_SEND_TIMEOUT_MS } from './app.js';
import { redactConfig } from '../log/json_log.js';
import { processLog } from '../log/readable_log.js';
import { DEFAULT_MAX_LOGITS_BYTES } from './logits_answer.js';
import { nodeMetrics } from './metrics.js';
import { checkOpenAccess, requestSeverity, startHttpServer, warnIfOpen } from './node_process.js';
import { NodeState } from './node_state.js';
import { redactDeep, redactSecrets } from '../log/redact.js';
import { traceFields } from '../log/trace_fields.js';

const PROGRESS_LOG_MS = 2000;
// A request's headers must be in within this; its body has the app's own deadline once admitted,
// and Node's whole-request timeout is set beyond both, as the last resort it is.
const HEADERS_TIMEOUT_MS = 20_000;

/**
 * Serves layers [begin, end) of `model` over HTTP. Returns at once with the listening server;
 * `loaded` settles when the weights are in (or failed to load), `shutdown()` stops accepting,
 * waits up to shutdownTimeoutMs for requests in flight, frees the node and resolves with the
 * number of requests it had to abandon.
 * @param {{model: string, layers?: [number, number], threads?: number, build?: 'threaded'|'single',
 *          port?: number, host?: string, cacheDir?: string, maxSessions?: number, maxKvBytes?: number,
 *          maxContext?: number, maxTokens?: number, maxQueue?: number, maxBatchRows?: number, maxLogitsBytes?: number, bodyTimeoutMs?: number,
 *          sendTimeoutMs?: number, authToken?: string, insecureNoAuth?: boolean,
 *          shutdownTimeoutMs?: number, ffnDownLayout?: 'units'|'features', cacheTypeK?: string, cacheTypeV?: string, maxSpan?: number,
 *          dotForm?: 'dot-add'|'pairs', perLayerRowCacheBytes?: number,
 *          draftModel?: string, log?: (severity: string, message: string, fields?: object) => void}} options
 *   dotForm: force the relaxed kernels' form of the Q4_0 dot product (LayerNode.open).
 *   draftModel: on the node serving the last layer, the MTP drafter beside its head (LayerNode.open).
 *   encoder: a promise of the projector's towers the node also serves (generation/node_encoder.js
 *   openNodeEncoder's; POST /v1/encode/image and /audio: encode_routes.js), the node ready once
 *   both are in; refused when its rows are not the model's width.
 *   Without authToken, host must be a loopback address unless insecureNoAuth is true: the node
 *   then serves /v1/* to anyone who reaches it, and logs so as a WARNING.
 * @example
 * const node = await serve({ model: 'r2://models/gemma-4-31B-q4_0.gguf', layers: [0, 6], port: 8080, authToken: process.env.AUTH_TOKEN });
 * process.once('SIGTERM', async () => process.exit((await node.shutdown()) === 0 ? 0 : 1));
 */
export async function serve({ model, layers, threads, build, port = 8080, host = '0.0.0.0', cacheDir, maxSessions = 64, maxKvBytes,
  maxContext = 0, maxTokens = 2048, maxQueue = 16, maxBatchRows, maxLogitsBytes = DEFAULT_MAX_LOGITS_BYTES, bodyTimeoutMs = DEFAULT_BODY_TIMEOUT_MS,
  sendTimeoutMs = DEFAULT_SEND_TIMEOUT_MS, authToken, insecureNoAuth = false, shutdownTimeoutMs = 10_000, ffnDownLayout, cacheTypeK, cacheTypeV, maxSpan,
  dotForm, perLayerRowCacheBytes, allowUnvalidatedSource = false, draftModel, encoder: encoderOpening, log: write = processLog() }) {
  // Whatever the sink, nothing secret reaches it.
  const log = (severity, message, fields = {}) => write(severity, redactSecrets(message), redactDeep(fields));
  checkOpenAccess({ authToken, host, insecureNoAuth }, '', 'the node');
  log('INFO', 'starting', {
    config: redactConfig({ model, layers, threads, build, port, host, cacheDir, maxSessions, maxKvBytes, maxContext, maxTokens, maxQueue, maxBatchRows, maxLogitsBytes,
      bodyTimeoutMs, sendTimeoutMs, authToken, insecureNoAuth, shutdownTimeoutMs, ffnDownLayout, cacheTypeK, cacheTypeV, maxSpan, perLayerRowCacheBytes, draftModel, encodesMedia: encoderOpening !== undefined }),
    s3Credentials: ['S3_ENDPOINT', 'R2_ENDPOINT', 'AWS_ACCESS_KEY_ID', 'R2_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'R2_SECRET_ACCESS_KEY'].filter((name) => process.env[name]),
  });
  warnIfOpen({ authToken, host, port }, log);
  const state = new NodeState();
  let http = null;  // the server, once listening: it counts the requests in flight
  const metrics = nodeMetrics(state, () => http?.inFlight() ?? 0);
  const observer = {
    ...metrics.observer,
    request(method, route, status, ms, trace) {
      metrics.observer.request(method, route, status, ms);
      log(requestSeverity(status), 'request', { method, route, status, ms: Number(ms.toFixed(2)), ...traceFields(trace) });
    },
    answerLost(route, outcome, message, trace) {
      log('WARNING', outcome === 'failed' ? 'answer cut short' : 'answer not delivered', { route, outcome, error: message, ...traceFields(trace) });
    },
  };
  const app = createLayerNodeApp({
    state, authToken, maxTokens, maxQueue, maxLogitsBytes, bodyTimeoutMs, sendTimeoutMs, observer,
    // @hono/node-server hands each request its Node response as env.outgoing.
    closeConnection: (c) => c.env?.outgoing?.destroy(),
  });
  // Node's defaults (a 300 s whole-request timeout, 60 s for headers) are not this protocol's. No
  // socket idle timeout: a forward of a long prompt may compute for minutes with nothing on the
  // wire; an answer nobody reads is cut by the app's send deadline instead.
  http = await startHttpServer(app, {
    port, host, log,
    timeouts: { headersTimeout: HEADERS_TIMEOUT_MS, requestTimeout: HEADERS_TIMEOUT_MS + bodyTimeoutMs + 10_000, timeout: 0 },
  });

  const t0 = performance.now();
  let lastLog = -Infinity;
  const opening = LayerNode.open({
    model, layers, threads, build, cacheDir, maxSessions, maxKvBytes, maxContext, maxBatchRows, ffnDownLayout, cacheTypeK, cacheTypeV, maxSpan,
    dotForm, perLayerRowCacheBytes,
    allowUnvalidatedSource,
    draftModel,
    onProgress: (progress) => {
      state.onProgress(progress);
      if (performance.now() - lastLog < PROGRESS_LOG_MS) return;
      lastLog = performance.now();
      log('INFO', 'loading', { bytes: progress.bytes, totalBytes: progress.totalBytes, etaSeconds: Number(progress.etaSeconds.toFixed(1)) });
    },
  });
  // The projector beside the layers: the node is ready once both are in.
  const encoding = encoderOpening ?? Promise.resolve(null);
  const loaded = Promise.allSettled([opening, encoding]).then(([n, e]) => {
    if (n.status === 'rejected' || e.status === 'rejected') {
      if (n.status === 'fulfilled') n.value.close();
      e.value?.close();
      throw n.status === 'rejected' ? n.reason : e.reason;
    }
    const [node, encoder] = [n.value, e.value];
    if (state.shuttingDown) {
      node.close();
      encoder?.close();
      return node;
    }
    try {
      if (encoder && encoder.vision.nEmbdText !== node.nEmbd) {
        throw new Error(`--mmproj: the projector gives rows of ${encoder.vision.nEmbdText} values, this model's width is ${node.nEmbd}: a projector of another model`);
      }
    } catch (error) {
      node.close();
      encoder.close();
      throw error;
    }
    state.encoder = encoder;
    state.loaded(node);
    const info = node.info();
    log('INFO', 'ready', { model: info.model, layers: info.layers, bytesLoaded: info.bytesLoaded, build: info.build, kernels: info.kernels, kernelChoice: info.kernelChoice, dotForm: info.dotForm?.reason ?? null, threads: info.threads, encodes: encoder ? (encoder.audio ? 'images, audio' : 'images') : null, loadSeconds: Number(((performance.now() - t0) / 1000).toFixed(2)) });
    return node;
  }).catch((error) => {
    log('ERROR', 'load failed', { code: error.code ?? error.name, error: error.message });
    throw error;
  });
  loaded.catch(() => {});  // the caller decides what a failed load means for the process

  async function shutdown() {
    if (state.shuttingDown) return 0;
    state.shuttingDown = true;
    log('INFO', 'shutting down', { inFlight: http.inFlight(), pendingWork: state.pendingWork, deadlineMs: shutdownTimeoutMs });
    // Requests in flight, and engine calls whose client may have gone: both finish, or the deadline passes.
    const abandoned = (await http.drain(() => state.whenIdle(), shutdownTimeoutMs)) + state.pendingWork;
    // A forward still running owns the engine: only an idle node is freed (else the exit frees it).
    if (state.pendingWork === 0 && state.node) {
      state.node.close();
      state.encoder?.close();
    }
    log(abandoned ? 'WARNING' : 'INFO', 'stopped', { abandoned });
    return abandoned;
  }

  return { url: http.url, port: http.port, state, app, server: http.server, loaded, shutdown };
}
