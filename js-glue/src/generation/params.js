// The request bodies of /v1/chat/completions and /v1/completions, checked and turned into one
// generation request. A field the gateway cannot honour with the value asked for (a
// tool_choice it cannot enforce, echo, best_of) is refused by name with a 400,
// never silently ignored; fields it does not know are ignored, as llama.cpp's server and vLLM
// do, so clients that send vendor extras still work.
import { given, isObject } from './body_values.js';
import { chatMessages } from './chat_messages.js';
import { badParam, OpenAIError } from './errors.js';
import { enableThinking, thinkingBudget } from './thinking.js';
import { toolParams } from './tools.js';

const MAX_STOPS = 4;  // OpenAI's limit
const MAX_TOP_LOGPROBS_CHAT = 20;
const MAX_LOGPROBS_COMPLETION = 5;
const MAX_CHOICES = 8;       // n: the choices of one request run one after another on its prefill
const MAX_LOGIT_BIAS = 1024; // entries of logit_bias

function number(body, name, { min, max, fallback }) {
  const v = body[name];
  if (!given(v)) return fallback;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max) throw badParam(name, `${name} must be a number in [${min}, ${max}], got ${JSON.stringify(v)}`);
  return v;
}

function integer(body, name, { min, max = Number.MAX_SAFE_INTEGER, fallback }) {
  const v = body[name];
  if (!given(v)) return fallback;
  if (!Number.isSafeInteger(v) || v < min || v > max) throw badParam(name, `${name} must be an integer in [${min}, ${max}], got ${JSON.stringify(v)}`);
  return v;
}

// OpenAI's seed is a 64-bit integer. JSON carries it as a double, exact up to 2^53 and rounded
// beyond, which still gives one value per request text: the same request samples the same tokens.
function seedOf(body) {
  const v = body.seed;
  if (!given(v)) return null;
  if (!Number.isInteger(v) || v < -(2 ** 63) || v >= 2 ** 64) throw badParam('seed', `seed must be an integer in [-2^63, 2^64), got ${JSON.stringify(v)}`);
  return v;
}

function boolean(body, name, fallback) {
  const v = body[name];
  if (!given(v)) return fallback;
  if (typeof v !== 'boolean') throw badParam(name, `${name} must be true or false, got ${JSON.stringify(v)}`);
  return v;
}

// Fields whose only supported value is their default: anything else is a 400 naming them.
function refuseUnsupported(body, names) {
  for (const [name, isDefault] of Object.entries(names)) {
    if (given(body[name]) && !isDefault(body[name])) {
      throw new OpenAIError(400, `${name} ${JSON.stringify(body[name])} is not supported by this gateway`, { param: name, code: 'unsupported_parameter' });
    }
  }
}

// logit_bias: {"token id": bias in [-100, 100]} -> Map (ids beyond the vocabulary: app.js).
function logitBias(body) {
  const v = body.logit_bias;
  if (!given(v)) return new Map();
  const entries = isObject(v) ? Object.entries(v) : null;
  if (!entries || entries.length > MAX_LOGIT_BIAS) throw badParam('logit_bias', `logit_bias must be an object of at most ${MAX_LOGIT_BIAS} "token id": bias entries`);
  return new Map(entries.map(([key, bias]) => {
    if (!/^(0|[1-9][0-9]{0,9})$/.test(key)) throw badParam('logit_bias', `logit_bias keys must be token ids (integers >= 0), got ${JSON.stringify(key.slice(0, 40))}`);
    if (typeof bias !== 'number' || !Number.isFinite(bias) || bias < -100 || bias > 100) {
      throw badParam('logit_bias', `logit_bias values must be numbers in [-100, 100], got ${JSON.stringify(bias)} for token ${key}`);
    }
    return [Number(key), bias];
  }));
}

function repetitionPenalty(body) {
  const v = number(body, 'repetition_penalty', { min: 0, max: 2, fallback: 1 });
  if (v === 0) throw badParam('repetition_penalty', 'repetition_penalty must be a number in (0, 2], got 0');
  return v;
}

function stops(body) {
  const v = body.stop;
  if (!given(v)) return [];
  const list = typeof v === 'string' ? [v] : v;
  if (!Array.isArray(list) || list.length > MAX_STOPS || list.some((s) => typeof s !== 'string' || s === '')) {
    throw badParam('stop', `stop must be a non-empty string or an array of at most ${MAX_STOPS} of them`);
  }
  return list;
}

// What every generation request shares: the model, how many tokens, sampling, stop, streaming.
function common(body, { maxTokensFallback }) {
  if (!isObject(body)) throw new OpenAIError(400, 'the request body must be a JSON object');
  if (typeof body.model !== 'string' || body.model === '') throw badParam('model', 'model is required (a string, one of GET /v1/models)');
  const maxTokens = integer(body, 'max_completion_tokens', { min: 1, fallback: integer(body, 'max_tokens', { min: 1, fallback: maxTokensFallback }) });
  const streamOptions = body.stream_options;
  if (given(streamOptions) && !isObject(streamOptions)) throw badParam('stream_options', 'stream_options must be an object');
  const stream = boolean(body, 'stream', false);
  if (given(streamOptions) && !stream) throw badParam('stream_options', 'stream_options is only allowed with stream: true');
  const seed = seedOf(body);
  return {
    model: body.model,
    n: integer(body, 'n', { min: 1, max: MAX_CHOICES, fallback: 1 }),
    maxTokens,
    sampling: {
      temperature: number(body, 'temperature', { min: 0, max: 2, fallback: 1 }),
      topP: number(body, 'top_p', { min: 0, max: 1, fallback: 1 }),
      topK: integer(body, 'top_k', { min: 0, fallback: 0 }),
      minP: number(body, 'min_p', { min: 0, max: 1, fallback: 0 }),
      logitBias: logitBias(body),
      presencePenalty: number(body, 'presence_penalty', { min: -2, max: 2, fallback: 0 }),
      frequencyPenalty: number(body, 'frequency_penalty', { min: -2, max: 2, fallback: 0 }),
      repetitionPenalty: repetitionPenalty(body),
      // Without a seed each request draws its own; with one, the same request samples the same tokens.
      seed: seed === null ? crypto.getRandomValues(new Uint32Array(1))[0] : Number(BigInt.asUintN(32, BigInt(seed))),
    },
    stop: stops(body),
    stream,
    includeUsage: given(streamOptions) && boolean(streamOptions, 'include_usage', false),
  };
}

/**
 * A /v1/chat/completions body -> {kind: 'chat', messages, tools, toolChoice, parallelToolCalls,
 * enableThinking, thinkingBudget, model, maxTokens, sampling, stop, logprobs, topLogprobs, stream,
 * includeUsage, responseFormat};
 * a 400 OpenAIError naming the field otherwise.
 * @example chatRequest({ model: 'm', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 8 })
 */
export function chatRequest(body) {
  const request = common(body, { maxTokensFallback: null });
  const messages = chatMessages(body.messages);
  const logprobs = boolean(body, 'logprobs', false);
  const topLogprobs = integer(body, 'top_logprobs', { min: 0, max: MAX_TOP_LOGPROBS_CHAT, fallback: 0 });
  if (topLogprobs > 0 && !logprobs) throw badParam('top_logprobs', 'top_logprobs needs logprobs: true');
  return { kind: 'chat', messages, ...toolParams(body), enableThinking: enableThinking(body), thinkingBudget: thinkingBudget(body), ...request, logprobs, topLogprobs,
    responseFormat: responseFormat(body.response_format) };
}

// response_format -> null (free text), {type: 'json_object'} or {type: 'json_schema', name,
// schema, strict}: the output constrained to it (tokens/grammar/). Whether the engine can take
// the schema is the engine's to say (a 400 naming the keyword when it cannot).
function responseFormat(v) {
  if (!given(v)) return null;
  if (!isObject(v)) throw badParam('response_format', 'response_format must be an object {type: "text" | "json_object" | "json_schema"}');
  if (v.type === 'text') return null;
  if (v.type === 'json_object') return { type: 'json_object' };
  if (v.type !== 'json_schema') throw badParam('response_format.type', `response_format.type must be text, json_object or json_schema, got ${JSON.stringify(v.type)}`);
  const spec = v.json_schema;
  if (!isObject(spec)) throw badParam('response_format.json_schema', 'response_format.json_schema must be an object {name, schema, strict}');
  if (typeof spec.name !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(spec.name)) {
    throw badParam('response_format.json_schema.name', 'response_format.json_schema.name must be 1 to 64 letters, digits, underscores or dashes');
  }
  const schema = spec.schema ?? {};
  if (!isObject(schema)) throw badParam('response_format.json_schema.schema', 'response_format.json_schema.schema must be a JSON schema object');
  if (given(spec.strict) && typeof spec.strict !== 'boolean') throw badParam('response_format.json_schema.strict', 'response_format.json_schema.strict must be true or false');
  return { type: 'json_schema', name: spec.name, schema, strict: spec.strict === true };
}

// A completion's prompt: a string, an array of token ids, or either wrapped in a one-item array.
function completionPrompt(prompt) {
  const one = Array.isArray(prompt) && prompt.length === 1 && (typeof prompt[0] === 'string' || Array.isArray(prompt[0])) ? prompt[0] : prompt;
  if (typeof one === 'string') return { text: one };
  if (Array.isArray(one) && one.length > 0 && one.every((t) => Number.isSafeInteger(t) && t >= 0)) return { tokens: one };
  if (Array.isArray(prompt) && prompt.length > 1 && !prompt.every(Number.isSafeInteger)) {
    throw new OpenAIError(400, 'a batch of several prompts is not supported: send one prompt per request', { param: 'prompt', code: 'unsupported_parameter' });
  }
  throw badParam('prompt', 'prompt must be a string or a non-empty array of token ids');
}

/**
 * A /v1/completions body -> {kind: 'completion', prompt: {text} | {tokens}, ...} as chatRequest;
 * logprobs here is OpenAI's legacy integer (top alternatives per token, at most 5).
 * @example completionRequest({ model: 'm', prompt: 'Once upon', max_tokens: 8 })
 */
export function completionRequest(body) {
  const request = common(body, { maxTokensFallback: 16 });
  refuseUnsupported(body, { best_of: (v) => v === 1, echo: (v) => v === false, suffix: (v) => v === '' });
  if (!given(body.prompt)) throw badParam('prompt', 'prompt is required');
  const logprobs = integer(body, 'logprobs', { min: 0, max: MAX_LOGPROBS_COMPLETION, fallback: null });
  return { kind: 'completion', prompt: completionPrompt(body.prompt), ...request, logprobs: logprobs !== null, topLogprobs: logprobs ?? 0 };
}

/** A 400 naming logit_bias when it biases a token id outside the model's vocabulary. */
export function checkLogitBias(request, nVocab) {
  for (const id of request.sampling.logitBias.keys()) {
    if (id >= nVocab) throw badParam('logit_bias', `logit_bias token id ${id} is outside the vocabulary (n_vocab ${nVocab})`);
  }
}
