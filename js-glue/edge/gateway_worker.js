// The OpenAI-compatible gateway as a worker (docs/gateway.md, "In the edge runtime"): the same
// app as `layerfold gateway` (src/gateway/app.js) in front of remote layer nodes. The pipeline
// opens once per isolate, on its first request; later requests share it, and a chat's next turn
// finds its session kept when it reaches the same isolate. Settings from the environment:
// the R2 binding MODEL and MODEL_KEY (the GGUF, for its header and tokenizer), NODES (the layer
// nodes' URLs in pipeline order), MODEL_ID (default: the key without .gguf), MAX_QUEUE,
// MAX_CACHED_SESSIONS, REQUEST_TIMEOUT_MS, SPECULATIVE, DRAFT_MAX, DRAFT_MIN_NGRAM (as the
// gateway command's; SPECULATIVE=mtp needs a last node that drafts: an edge worker with
// DRAFT_MODEL_KEY, or `serve --draft-model`), ENCODER_URL and IMAGE_MAX_TOKENS (an encoder node,
// `serve --mmproj`, that encodes the chats' images and audio, and an image's budget; without it
// media parts are refused), and the secrets AUTH_TOKEN (the clients' API key) and
// NODES_AUTH_TOKEN (the nodes' and the encoder node's, never the clients' key).
import xgrammar from '@mlc-ai/web-xgrammar';
import wasm from '../dist/layerfold_wasi.wasm';
import { useAudioDecoders } from '../src/audio/decode_audio.js';
import { createGatewayApp } from '../src/gateway/app.js';
import { DEFAULT_IMAGE_MAX_TOKENS } from '../src/generation/media.js';
import { mediaInput } from '../src/generation/media_pipeline.js';
import { speculativeOptions } from '../src/generation/prompt_lookup.js';
import { IMAGE_MAX_TOKENS, IMAGE_MIN_TOKENS } from '../src/gguf/projector_config.js';
import { RefusedMedia } from '../src/generation/refused_media.js';
import { RemoteEncoder } from '../src/generation/remote_encoder.js';
import { NodeState } from '../src/server/node_state.js';
import { GrammarEngine } from '../src/tokens/grammar/engine.js';
import { useWebpDecoder } from '../src/vision/decode_image.js';
import { openEdgePipeline } from './edge_gateway.js';
// The media decoders' modules, written beside the bundle (media_decoders_bundle.js): an isolate
// compiles no WebAssembly at run time.
import flacWasm from './flac.wasm';
import mp3Wasm from './mpg123.wasm';
import webpWasm from './webp_dec.wasm';

useWebpDecoder(webpWasm);
useAudioDecoders({ mp3: mp3Wasm, flac: flacWasm });

let isolate = null;  // { app, opening, failure }

// No Gemma 4 vision tower or audio encoder fits an isolate beside the coordinator: E2B's vision
// tower, the smallest, is over 300 MB in F16, and its buffers for one image of 280 soft tokens
// (2520 patches) over 150 MB more; its audio encoder (12 Conformer blocks 1024 wide) over 600 MB.
// An encoder node holds them (ENCODER_URL).
const noMedia = (kind) => `this edge gateway reads no ${kind === 'audio' ? 'audio' : 'images'}: no Gemma 4 ` +
  `${kind === 'audio' ? 'audio encoder' : 'vision tower'} fits an isolate's 128 MiB; set ENCODER_URL to an encoder node ` +
  '(layerfold serve --mmproj), or send them to a gateway in a container (layerfold gateway --mmproj)';

function number(env, name) {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < 0) throw new Error(`${name}=${JSON.stringify(String(raw))}: expected an integer ≥ 0`);
  return value;
}

function startIsolate(env) {
  const state = new NodeState();
  const current = { app: null, opening: null, failure: null };
  current.opening = (async () => {
    if (typeof env.MODEL?.get !== 'function') throw new Error('no R2 binding MODEL: bind the bucket holding the GGUF as MODEL');
    if (!env.MODEL_KEY) throw new Error('MODEL_KEY is not set: the key of the GGUF in the MODEL bucket');
    const speculative = speculativeOptions({ mode: env.SPECULATIVE || undefined, maxDraft: number(env, 'DRAFT_MAX'), minNgram: number(env, 'DRAFT_MIN_NGRAM') },
      (name) => name.toUpperCase().replaceAll('-', '_'));
    const options = { maxQueue: number(env, 'MAX_QUEUE'), maxCachedSessions: number(env, 'MAX_CACHED_SESSIONS'), requestTimeoutMs: number(env, 'REQUEST_TIMEOUT_MS'), speculative };
    const maxTokens = number(env, 'IMAGE_MAX_TOKENS') ?? DEFAULT_IMAGE_MAX_TOKENS;
    if (maxTokens < IMAGE_MIN_TOKENS || maxTokens > IMAGE_MAX_TOKENS) {
      throw new Error(`IMAGE_MAX_TOKENS=${maxTokens}: an image's budget is ${IMAGE_MIN_TOKENS} to ${IMAGE_MAX_TOKENS} soft tokens`);
    }
    let media = new RefusedMedia(noMedia);
    current.app = createGatewayApp({
      state, modelId: env.MODEL_ID || env.MODEL_KEY.replace(/^.*\//, '').replace(/\.gguf$/i, ''), authToken: env.AUTH_TOKEN,
      // The bundle's one instance of the grammar engine (edge/xgrammar_bundle.js).
      openGrammar: (pipeline, endIds) => new GrammarEngine(async () => xgrammar, pipeline.tokenizer, endIds),
      media: () => media,
      ...Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)),
    });
    const pipeline = await openEdgePipeline({ module: wasm, bucket: env.MODEL, key: env.MODEL_KEY, nodes: env.NODES, authToken: env.NODES_AUTH_TOKEN });
    try {
      // Refused at open, not at every request: the Model is made at the first one.
      if (speculative?.mtp && !pipeline.drafts) {
        throw new Error('SPECULATIVE=mtp: the last node has no draft model (DRAFT_MODEL_KEY on the edge worker serving the last layers, or serve --draft-model)');
      }
      if (env.ENCODER_URL) {
        const towers = await RemoteEncoder.open(env.ENCODER_URL, { authToken: env.NODES_AUTH_TOKEN });
        media = mediaInput(pipeline, towers, { maxTokens }, 'ENCODER_URL');
      }
    } catch (error) {
      await pipeline.close();
      throw error;
    }
    state.loaded(pipeline);
  })().catch((error) => {
    current.failure = error;
  });
  return current;
}

export default {
  /**
   * The OpenAI API, once this isolate's pipeline is open.
   * @example const response = await worker.fetch(new Request('https://gw.example/v1/models'), env, ctx);
   */
  async fetch(request, env, ctx) {
    if (isolate?.failure) isolate = null;  // the next request tries again
    isolate ??= startIsolate(env);
    const current = isolate;
    ctx.waitUntil(current.opening);
    await current.opening;
    if (current.failure) {
      return Response.json({ error: { message: `the gateway could not open its pipeline: ${current.failure.message}`, type: 'server_error', param: null, code: 'not_ready' } },
        { status: 503 });
    }
    return current.app.fetch(request, env, ctx);
  },
};
