// The gateway as a Node process: the app on @hono/node-server, listening at once (/healthz,
// /readyz) while the pipeline opens in the background; Prometheus metrics; one log line per
// event (JSON, or readable on a terminal), redacted; SIGTERM drains (no new requests, the ones
// under way finish or the deadline passes), as `serve` does for a layer node. Without a token it
// binds loopback only, unless told otherwise in so many words.
import { isSynthetic } from '../gguf/header.js';
import { Pipeline } from '../pipeline/pipeline.js';
import { redactConfig } from '../log/json_log.js';
import { processLog } from '../log/readable_log.js';
import { checkOpenAccess, requestSeverity, startHttpServer, warnIfOpen } from '../server/node_process.js';
import { NodeState } from '../server/node_state.js';
import { redactDeep, redactSecrets } from '../log/redact.js';
import { traceFields } from '../log/trace_fields.js';
import { GrammarThread } from '../generation/grammar_thread.js';
import { DEFAULT_IMAGE_MAX_TOKENS } from '../generation/media.js';
import { mediaInput } from '../generation/media_pipeline.js';
import { useNodeMediaDecoders } from '../generation/node_media_decoders.js';
import { openProjectorModule } from '../generation/open_projector.js';
import { RemoteEncoder } from '../generation/remote_encoder.js';
import { TokenizerThread } from '../generation/tokenizer_thread.js';
import { createGatewayApp } from './app.js';
import { gatewayMetrics } from './metrics.js';

/**
 * Serves the OpenAI API over a pipeline of `model` on `nodes` (Pipeline.open's spec). Returns
 * at once with the listening server; `opened` settles when the pipeline is open (or failed),
 * `shutdown()` drains and resolves with the number of requests it had to abandon.
 * @param {{model: string, nodes?: string, modelId: string, threads?: number, build?: string, cacheDir?: string,
 *          port?: number, host?: string, authToken?: string, nodesAuthToken?: string, insecureNoAuth?: boolean,
 *          maxQueue?: number, maxCachedSessions?: number, maxSessions?: number, checkpoints?: number, requestTimeoutMs?: number,
 *          sendTimeoutMs?: number, shutdownTimeoutMs?: number, speculative?: object, draftModel?: string, allowUnvalidatedSource?: boolean,
 *          images?: {mmproj?: string, encoder?: string, maxTokens?: number, fetchUrls?: boolean, maxBytes?: number, fetchTimeoutMs?: number},
 *          log?: Function}} options
 *   images: chats' image parts, and audio parts where the projector has an audio encoder (E2B,
 *   E4B), read with it: `mmproj` (a path or URL) encoded on `threads` workers of a module of its
 *   own, or `encoder` the URL of an encoder node (serve --mmproj) sent nodesAuthToken; one of
 *   the two (MediaInput's options the rest). Local nodes take spans of maxTokens, and a remote
 *   node that takes fewer is refused at open.
 * @example const gw = await serveGateway({ model: 'tiny.gguf', nodes: 'local:0-1', modelId: 'tiny', port: 8000, host: '127.0.0.1' });
 */
export async function serveGateway({ model, nodes, modelId, threads, build, cacheDir, port = 8000, host = '127.0.0.1', authToken, nodesAuthToken,
  insecureNoAuth = false, maxQueue, maxCachedSessions, maxSessions, checkpoints, requestTimeoutMs, sendTimeoutMs, shutdownTimeoutMs = 10_000, speculative,
  draftModel, allowUnvalidatedSource = false, images, log: write = processLog() }) {
  const log = (severity, message, fields = {}) => write(severity, redactSecrets(message), redactDeep(fields));
  checkOpenAccess({ authToken, host, insecureNoAuth }, ' the gateway', 'the model');
  log('INFO', 'starting', { config: redactConfig({ model, nodes, modelId, threads, build, port, host, cacheDir, authToken, insecureNoAuth, maxQueue, maxCachedSessions,
    maxSessions, checkpoints, requestTimeoutMs, sendTimeoutMs, shutdownTimeoutMs, speculative, draftModel, images }) });
  warnIfOpen({ authToken, host, port }, log);

  const state = new NodeState();
  let http = null;  // the server, once listening: it counts the requests in flight
  const metrics = gatewayMetrics(() => http?.inFlight() ?? 0);
  const observer = {
    ...metrics.observer,
    request(method, route, status, ms, trace) {
      metrics.observer.request(method, route, status, ms);
      log(requestSeverity(status), 'request', { method, route, status, ms: Number(ms.toFixed(2)), ...traceFields(trace) });
    },
    finished(completionTokens, ms, trace) {
      metrics.observer.finished(completionTokens, ms);
      log('INFO', completionTokens === null ? 'generation stopped' : 'generation finished', { completionTokens, ms: Number(ms.toFixed(2)), ...traceFields(trace) });
    },
  };
  // Prompts are tokenized, and grammars compiled and asked, on threads of their own: a long
  // prompt or a large schema would stall the event loop.
  let tokenizerThread = null;
  let grammarThread = null;
  let vision = null;  // {towers, media}
  const app = createGatewayApp({ state, modelId, authToken, maxQueue, maxCachedSessions, checkpoints, requestTimeoutMs, sendTimeoutMs, speculative, observer,
    encodePrompt: (input) => tokenizerThread.encode(input), openGrammar: () => grammarThread, media: () => vision?.media ?? null,
    closeConnection: (c) => c.env?.outgoing?.destroy() });
  // A long generation may stream for minutes: no whole-request or idle timeout of Node's own; the
  // app's deadline and send timeout bound it instead.
  http = await startHttpServer(app, { port, host, log, timeouts: { requestTimeout: 0, timeout: 0 } });

  const t0 = performance.now();
  const maxSpan = images ? images.maxTokens ?? DEFAULT_IMAGE_MAX_TOKENS : 0;
  const opened = Pipeline.open({ model, nodes, threads, build, cacheDir, authToken: nodesAuthToken, maxSessions, allowUnvalidatedSource, draftModel, maxSpan }).then(async (pipeline) => {
    try {
      // Refused at open, not at every request: the Model is made at the first one.
      if (speculative?.mtp && !pipeline.drafts) {
        throw new Error('--speculative mtp: the last node has no draft model (--draft-model, or serve --draft-model on a remote last node)');
      }
      if (images) vision = await openVision(pipeline, images, { threads, cacheDir, allowUnvalidatedSource, nodesAuthToken });
      tokenizerThread = await TokenizerThread.open(pipeline.header);
      grammarThread = new GrammarThread(pipeline.header, pipeline.tokenizer.nVocab);
    } catch (error) {
      closeVision(vision);
      await pipeline.close();
      throw error;
    }
    if (state.shuttingDown) {
      await tokenizerThread.close();
      pipeline.close();
      return pipeline;
    }
    state.loaded(pipeline);
    const synthetic = isSynthetic(pipeline.header);
    if (synthetic) log('WARNING', 'synthetic model: make-model made it, its weights are random and its answers mean nothing', { name: pipeline.header.metadata['general.name'] });
    log('INFO', 'ready', { nodes: pipeline.nodes.map((n) => ({ layers: n.layers, url: n.url })), synthetic, openSeconds: Number(((performance.now() - t0) / 1000).toFixed(2)) });
    return pipeline;
  }, (error) => {
    log('ERROR', 'pipeline failed to open', { code: error.code ?? error.name, error: error.message });
    throw error;
  });
  opened.catch(() => {});

  async function shutdown() {
    if (state.shuttingDown) return 0;
    state.shuttingDown = true;
    log('INFO', 'shutting down', { inFlight: http.inFlight(), pendingWork: state.pendingWork, deadlineMs: shutdownTimeoutMs });
    const abandoned = await http.drain(() => state.whenIdle(), shutdownTimeoutMs);
    if (state.pendingWork === 0 && state.node) await state.node.close();
    await tokenizerThread?.close();
    await grammarThread?.close();
    closeVision(vision);
    log(abandoned ? 'WARNING' : 'INFO', 'stopped', { abandoned });
    return abandoned;
  }

  return { url: http.url, port: http.port, state, app, server: http.server, opened, shutdown };
}

// The projector's towers, on a module of their own (mmproj) or an encoder node's (encoder, sent
// the nodes' token), refused when they are another model's or a node of the pipeline cannot take
// the items they make.
async function openVision(pipeline, { mmproj, encoder, ...options }, { threads, cacheDir, allowUnvalidatedSource, nodesAuthToken }) {
  const towers = encoder
    ? await RemoteEncoder.open(encoder, { authToken: nodesAuthToken })
    : await openProjectorModule(mmproj, { threads, cacheDir, allowUnvalidatedSource });
  try {
    await useNodeMediaDecoders();
    return { towers, media: mediaInput(pipeline, towers, options, encoder ? '--encoder' : '--mmproj') };
  } catch (error) {
    towers.close();
    throw error;
  }
}

function closeVision(vision) {
  vision?.towers.close();
}
