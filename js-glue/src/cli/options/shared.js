// Options several commands share, as schema entries (options/read_options.js).

// The engine's most threads (kMaxThreads, src/model/model.h): lf_model_set_threads refuses more.
const MAX_THREADS = 256;

export const MODEL = { kind: 'string', value: 'PATH', help: 'the GGUF (MODEL below)', shown: 'the built-in default model' };

export const THREADS = {
  kind: 'integer', min: 1, max: MAX_THREADS, value: 'N', help: 'engine threads of a local node (the threaded build)',
  shown: 'the machine\'s parallelism',
};

export const BUILD = {
  kind: 'choice', choices: ['threaded', 'single'], value: 'BUILD', help: 'the engine build of the local nodes',
  shown: 'threaded where the runtime has threads',
};

/** The KV cache's types of a local node (docs/attention.md, "Quantized cache"), as llama.cpp's -ctk / -ctv. */
export const CACHE_TYPE_K = { kind: 'choice', choices: ['f16', 'q8_0', 'q4_0'], value: 'TYPE', help: 'K cache type of a local node', default: 'f16' };
export const CACHE_TYPE_V = { ...CACHE_TYPE_K, help: 'V cache type of a local node' };
export const MAX_SPAN = {
  kind: 'integer', min: 0, max: 8192, value: 'N', default: 0,
  help: 'rows of the longest media span (an image\'s soft tokens) a local node takes; its sliding rings grow by it (0: 64)',
};

export const DOT_FORM = {
  kind: 'choice', choices: ['dot-add', 'pairs'], value: 'FORM', help: 'force the relaxed kernels\' form of the Q4_0 dot product (same bits; docs/kernels.md)',
  shown: 'the faster here, timed at load',
};

export const CACHE_DIR = { kind: 'string', value: 'DIR', help: 'disk cache of a remote model', shown: 'none' };

export const ALLOW_UNVALIDATED_SOURCE = {
  kind: 'boolean', env: 'LAYERFOLD_ALLOW_UNVALIDATED_SOURCE', help: 'open a model URL whose server sends neither ETag nor Last-Modified',
};

export const JSON_OUTPUT = { kind: 'boolean', help: 'print JSON' };

/** How tokens are drawn (tokens/sampler.js), within the gateway's bounds on the same settings (generation/params.js), as the OpenAI API has them. */
export const SAMPLING_OPTIONS = {
  temperature: { kind: 'number', min: 0, max: 2, value: 'T', help: 'sampling temperature, 0 greedy', default: 0 },
  'top-k': { kind: 'integer', min: 0, value: 'K', help: 'sample among the K most likely, 0 all', default: 40 },
  'top-p': { kind: 'number', min: 0, max: 1, value: 'P', help: 'sample among the most likely of this total probability', default: 0.95 },
  seed: { kind: 'integer', min: 0, max: 2 ** 32 - 1, value: 'S', help: 'the sampler\'s seed (the same seed, the same tokens)', default: 1 },
};

/**
 * The Sampler's settings from SAMPLING_OPTIONS, read.
 * @example new Sampler(samplingOf(options))
 */
export const samplingOf = (options) => ({ temperature: options.temperature, topK: options['top-k'], topP: options['top-p'], seed: options.seed });

/** What every command running a pipeline in this process takes. */
export const PIPELINE_OPTIONS = {
  threads: THREADS,
  nodes: { kind: 'string', value: 'SPEC', help: 'the pipeline\'s nodes (SPEC below)', shown: 'one local node of every layer' },
  build: BUILD,
  'cache-type-k': CACHE_TYPE_K,
  'cache-type-v': CACHE_TYPE_V,
  'max-span': MAX_SPAN,
  'cache-dir': { ...CACHE_DIR, shown: 'objects/ under the layerfold cache directory' },
  'allow-unvalidated-source': ALLOW_UNVALIDATED_SOURCE,
  json: JSON_OUTPUT,
};

// The longest timeout Node's timers keep (2^31 - 1 ms): a longer one fires at once.
const MAX_TIMEOUT_MS = 2 ** 31 - 1;

/** A TCP port; 0 asks the system for a free one. */
export const PORT = { kind: 'integer', min: 0, max: 65535, value: 'P', help: 'the port to listen on (0: any free one)' };

/** A timeout in milliseconds from `min`, and its default. */
export const timeoutMs = (min, help, fallback) => ({ kind: 'integer', min, max: MAX_TIMEOUT_MS, value: 'MS', help, default: fallback });

/**
 * serve's and gateway's options, each also read from the variable of its name in capitals (- as
 * _) unless it names its own.
 * @example fromEnv({ 'max-queue': spec })['max-queue'].env // 'MAX_QUEUE'
 */
export const fromEnv = (options) => Object.fromEntries(Object.entries(options).map(([name, spec]) =>
  [name, { env: name.toUpperCase().replaceAll('-', '_'), ...spec }]));
