// A checked request's prompt as token ids: chat messages, tools and the thinking switch through
// the model's chat template (client text never becomes control tokens; an image or audio part its
// soft-token rows between the vocabulary's image or audio markers, as llama.cpp's mtmd places
// them: media.js), a completion's text by
// llama.cpp's rule (BOS added, control tokens parsed: tokens/prompt_input.js), or a completion's
// token ids as given (each checked against the vocabulary); and the tokens it may generate within
// the model's context. A prompt too long to fit is refused from its byte length, before it is
// tokenized.
import { ChatContentError, renderChat } from '../tokens/chat.js';
import { encodePrompt, fewestTokens, textBetween, textPrompt } from '../tokens/prompt_input.js';
import { badParam, OpenAIError } from './errors.js';

// The vocabulary's markers around a media item of each kind, as mtmd writes them for Gemma 4.
const MARKERS = { image: ['<|image>', '<image|>'], audio: ['<|audio>', '<audio|>'] };

const contextExceeded = (message) => new OpenAIError(400, message, { param: 'messages', code: 'context_length_exceeded' });

// The request's prompt as tokens/prompt_input.js's input (not yet tokenized).
function promptInput(pipeline, request) {
  if (request.kind !== 'chat') return textPrompt(request.prompt.text);
  try {
    return renderChat(pipeline.header, pipeline.tokenizer, request.messages, { tools: request.tools, enableThinking: request.enableThinking });
  } catch (error) {
    if (error instanceof ChatContentError) throw badParam(error.param, error.message);
    throw new OpenAIError(400, `the chat template could not render these messages: ${error.message}`, { param: 'messages', code: 'chat_template_error' });
  }
}

// The vocabulary's id of `text` as one control token, or a 400 naming the part that needs it.
function controlId(tokenizer, text, param) {
  const ids = tokenizer.encode(text, { addBos: false, parseSpecial: true });
  if (ids.length !== 1) throw badParam(param, `${param}: this model's vocabulary has no ${text} token to place it with`);
  return ids[0];
}

// The prompt's ids with each media item's run of placeholders between its kind's markers
// (<|image> and <image|>, <|audio> and <audio|>), where the template put it, and the items by
// placeholder. Their soft tokens are counted before any is encoded: a prompt they cannot fit in
// the context is refused without that work.
async function withMedia(pipeline, input, encode, media, signal, fewestText) {
  const { param, type } = input.media[0].part;
  if (!media) throw badParam(param, `${param}: this gateway reads no ${type === 'audio' ? 'audio' : 'images'} (start it with --mmproj)`);
  const read = [];  // first, so that a host refusing media (RefusedMedia) says why before anything else
  for (const { part } of input.media) read.push(await media.read(part, { signal }));
  const markers = read.map((r, k) => {
    const [open, close] = MARKERS[r.kind];
    const at = input.media[k].part.param;
    return [controlId(pipeline.tokenizer, open, at), controlId(pipeline.tokenizer, close, at)];
  });
  const nCtx = pipeline.header.info.n_ctx_train;
  const least = fewestText + read.reduce((n, r) => n + r.tokens + 2, 0);
  if (least >= nCtx) throw contextExceeded(`the prompt is at least ${least} tokens, its ${read.length} media items' included; this model's context is ${nCtx} tokens`);
  const items = new Map();
  const runs = [];
  for (const r of read) {
    signal?.throwIfAborted();
    const item = await media.encode(r);
    items.set(item.placeholder, item);
    runs.push(item);
  }
  const texts = textBetween(input, input.media.map((m) => m.at));
  const ids = [];
  for (const [k, text] of texts.entries()) {
    ids.push(...await encode(text));
    if (k < runs.length) ids.push(markers[k][0], ...new Array(runs[k].tokens).fill(runs[k].placeholder), markers[k][1]);
  }
  return { ids, items };
}

/**
 * The request's prompt: {ids, items} (items: its media items by placeholder, media.js; empty without);
 * a 400 naming the problem when it cannot be made, or context_length_exceeded when its bytes are
 * more than the model's context can hold. encode(input) tokenizes (default: here; the Node host
 * hands it to a TokenizerThread); media: the gateway's MediaInput, without which media parts are
 * refused; signal: the request's, which an image fetch under way heeds.
 * @example const { ids } = await promptTokens(pipeline, request, (input) => thread.encode(input));
 */
export async function promptTokens(pipeline, request, encode = (input) => encodePrompt(pipeline.tokenizer, input), media = null, signal = undefined) {
  const { tokenizer } = pipeline;
  if (request.kind !== 'chat' && request.prompt.text === undefined) {
    const bad = request.prompt.tokens.find((t) => t >= tokenizer.nVocab || t < 0);
    if (bad !== undefined) throw badParam('prompt', `token id ${bad} is outside the vocabulary (n_vocab ${tokenizer.nVocab})`);
    return { ids: request.prompt.tokens, items: new Map() };
  }
  const input = promptInput(pipeline, request);
  const nCtx = pipeline.header.info.n_ctx_train;
  const fewest = fewestTokens(tokenizer, input.bytes.length);
  if (fewest >= nCtx) {
    throw contextExceeded(`the prompt is ${input.bytes.length} bytes, at least ${fewest} tokens (a token stands for at most ${tokenizer.maxTokenBytes} bytes); this model's context is ${nCtx} tokens`);
  }
  if (input.media?.length) return withMedia(pipeline, input, encode, media, signal, fewest);
  const { media: _none, ...text } = input;
  return { ids: await encode(text), items: new Map() };
}

/**
 * How many tokens the request may generate: what it asked for, cut to the model's context
 * (n_ctx_train, every node's session limit) after the prompt; a 400 context_length_exceeded
 * when the prompt leaves no room.
 */
export function tokenBudget(pipeline, request, promptLength) {
  const nCtx = pipeline.header.info.n_ctx_train;
  if (promptLength >= nCtx) throw contextExceeded(`the prompt is ${promptLength} tokens; this model's context is ${nCtx} tokens`);
  return Math.min(request.maxTokens ?? Infinity, nCtx - promptLength);
}
