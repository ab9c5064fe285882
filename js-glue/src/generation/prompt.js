// A checked request's prompt as token ids: chat messages, tools and the thinking switch through
// the model's chat template (client text never becomes control tokens), a completion's text by
// llama.cpp's rule (BOS added, control tokens parsed: tokens/prompt_input.js), or a completion's
// token ids as given (each checked against the vocabulary); and the tokens it may generate within
// the model's context. A prompt too long to fit is refused from its byte length, before it is
// tokenized.
import { ChatContentError, renderChat } from '../tokens/chat.js';
import { encodePrompt, fewestTokens, textPrompt } from '../tokens/prompt_input.js';
import { badParam, OpenAIError } from './errors.js';

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

/**
 * The request's prompt tokens; a 400 naming the problem when it cannot be made, or
 * context_length_exceeded when its bytes are more than the model's context can hold.
 * encode(input) tokenizes (default: here; the Node host hands it to a TokenizerThread).
 * @example const prompt = await promptTokens(pipeline, request, (input) => thread.encode(input));
 */
export async function promptTokens(pipeline, request, encode = (input) => encodePrompt(pipeline.tokenizer, input)) {
  const { tokenizer } = pipeline;
  if (request.kind !== 'chat' && request.prompt.text === undefined) {
    const bad = request.prompt.tokens.find((t) => t >= tokenizer.nVocab);
    if (bad !== undefined) throw badParam('prompt', `token id ${bad} is outside the vocabulary (n_vocab ${tokenizer.nVocab})`);
    return request.prompt.tokens;
  }
  const input = promptInput(pipeline, request);
  const nCtx = pipeline.header.info.n_ctx_train;
  const fewest = fewestTokens(tokenizer, input.bytes.length);
  if (fewest >= nCtx) {
    throw contextExceeded(`the prompt is ${input.bytes.length} bytes, at least ${fewest} tokens (a token stands for at most ${tokenizer.maxTokenBytes} bytes); this model's context is ${nCtx} tokens`);
  }
  return encode(input);
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
