// How a chat answer's text is read: on a model that writes Gemma 4's output format (its
// vocabulary has the thought channel's markers as tokens, thought_channel.js's channelMarkers),
// by Gemma 4's reader, which puts the thought channel in reasoning_content whether or not
// thinking was asked for, and reads tool calls to the functions the request lets the model
// call; on any other model the text is the content. The request's fields are the ones
// params.js gives: tools (OpenAI's [{type: 'function', function: {name, …}}]), toolChoice
// ('auto' | 'none' | 'required' | {type: 'function', function: {name}}) and parallelToolCalls.
import { Gemma4Output } from '../chat/gemma4_output.js';

// The names of the functions the model may call: none with tool_choice "none", the named one
// when tool_choice names one, else every declared one. A declaration without a name declares
// nothing to call (params.js refuses it; this reader need not trust that).
function callable({ tools, toolChoice = 'auto' }) {
  if (toolChoice === 'none' || !Array.isArray(tools)) return [];
  const names = tools.map((t) => t?.function?.name).filter((n) => typeof n === 'string' && n !== '');
  return typeof toolChoice === 'object' && toolChoice !== null ? names.filter((n) => n === toolChoice.function?.name) : names;
}

/**
 * The reader of one request's answer (chat/gemma4_output.js's Gemma4Output), or null when its
 * text is its content (completions, other models).
 * @example const reader = chatOutputReader(request, channelMarkers(tokenizer) !== null);
 */
export function chatOutputReader(request, gemma4) {
  if (request.kind !== 'chat' || !gemma4) return null;
  return new Gemma4Output({ tools: callable(request), parallelToolCalls: request.parallelToolCalls ?? true });
}

/** OpenAI's finish_reason: "tool_calls" for a turn the model ended after calling functions. */
export function finishReasonOf(finishReason, message) {
  return finishReason === 'stop' && message?.tool_calls.length > 0 ? 'tool_calls' : finishReason;
}
