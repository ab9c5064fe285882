// A checked request's prompt as token ids: chat messages through the model's chat template,
// a completion's text with BOS, or a completion's token ids as given (each checked against the
// vocabulary); and the tokens it may generate within the model's context.
import { chatTokens } from '../tokens/chat.js';
import { badParam, OpenAIError } from './errors.js';

/** The request's prompt tokens; a 400 naming the problem when it cannot be made. */
export function promptTokens(pipeline, request) {
  const { tokenizer } = pipeline;
  if (request.kind === 'chat') {
    try {
      return chatTokens(pipeline.header, tokenizer, request.messages);
    } catch (error) {
      throw new OpenAIError(400, `the chat template could not render these messages: ${error.message}`, { param: 'messages', code: 'chat_template_error' });
    }
  }
  if (request.prompt.text !== undefined) return tokenizer.encode(request.prompt.text, { addBos: true });
  const bad = request.prompt.tokens.find((t) => t >= tokenizer.nVocab);
  if (bad !== undefined) throw badParam('prompt', `token id ${bad} is outside the vocabulary (n_vocab ${tokenizer.nVocab})`);
  return request.prompt.tokens;
}

/**
 * How many tokens the request may generate: what it asked for, cut to the model's context
 * (n_ctx_train, every node's session limit) after the prompt; a 400 context_length_exceeded
 * when the prompt leaves no room.
 */
export function tokenBudget(pipeline, request, promptLength) {
  const nCtx = pipeline.header.info.n_ctx_train;
  if (promptLength >= nCtx) {
    throw new OpenAIError(400, `the prompt is ${promptLength} tokens; this model's context is ${nCtx} tokens`, { param: 'messages', code: 'context_length_exceeded' });
  }
  return Math.min(request.maxTokens ?? Infinity, nCtx - promptLength);
}
