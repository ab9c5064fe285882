// Whether the model thinks before it answers, from the switches clients send: OpenAI's
// `reasoning_effort` and `chat_template_kwargs.enable_thinking`, as llama.cpp's server and vLLM
// take them. Gemma 4's template has thinking on or off, no levels: any effort but "none" turns it
// on. Without either switch it is off, the template's own default (llama.cpp's server turns it on
// for any template that can think; vLLM leaves it to the template).
import { given, isObject } from './body_values.js';
import { badParam, OpenAIError } from './errors.js';

const EFFORTS = ['none', 'minimal', 'low', 'medium', 'high'];

// chat_template_kwargs.enable_thinking, or undefined; any other template argument is refused:
// the template is given only what llama.cpp's common chat layer gives it.
function kwargsSwitch(body) {
  const kwargs = body.chat_template_kwargs;
  if (!given(kwargs)) return undefined;
  if (!isObject(kwargs)) throw badParam('chat_template_kwargs', 'chat_template_kwargs must be an object');
  for (const key of Object.keys(kwargs)) {
    if (key !== 'enable_thinking') {
      throw new OpenAIError(400, `chat_template_kwargs.${key} is not supported by this gateway (only enable_thinking is)`, { param: `chat_template_kwargs.${key}`, code: 'unsupported_parameter' });
    }
  }
  const v = kwargs.enable_thinking;
  if (given(v) && typeof v !== 'boolean') throw badParam('chat_template_kwargs.enable_thinking', `chat_template_kwargs.enable_thinking must be true or false, got ${JSON.stringify(v)}`);
  return v ?? undefined;
}

/**
 * A chat body's thinking switch: reasoning_effort "none" turns thinking off whatever else is
 * asked (as llama.cpp's server), else chat_template_kwargs.enable_thinking decides, else any
 * other effort turns it on; off when neither is given. A 400 naming the field for a bad value.
 * @example enableThinking({ reasoning_effort: 'high' }) // true
 */
export function enableThinking(body) {
  const effort = body.reasoning_effort;
  if (given(effort) && !EFFORTS.includes(effort)) throw badParam('reasoning_effort', `reasoning_effort must be one of ${EFFORTS.join(', ')}, got ${JSON.stringify(effort)}`);
  const kwarg = kwargsSwitch(body);
  if (effort === 'none') return false;
  return kwarg ?? given(effort);
}

/** Longest reasoning_budget_message taken, in characters. */
export const MAX_BUDGET_MESSAGE = 1000;

function budgetTokens(body) {
  // llama.cpp's server reads reasoning_budget_tokens, else thinking_budget_tokens; -1 is no budget.
  const name = given(body.reasoning_budget_tokens) ? 'reasoning_budget_tokens' : 'thinking_budget_tokens';
  const v = body[name];
  if (!given(v)) return null;
  if (!Number.isSafeInteger(v) || v < -1 || v > 0x7fffffff) throw badParam(name, `${name} must be an integer in [-1, 2147483647] (-1: no budget), got ${JSON.stringify(v)}`);
  return v === -1 ? null : v;
}

/**
 * A chat body's thinking budget: {tokens, message} from reasoning_budget_tokens (or
 * thinking_budget_tokens) and reasoning_budget_message, as llama.cpp's server takes them, or
 * null for none. The thought channel is closed after `tokens` thought tokens, `message` (plain
 * text) written before its closing marker. A 400 naming the field for a bad value.
 * @example thinkingBudget({ thinking_budget_tokens: 256 }) // {tokens: 256, message: ''}
 */
export function thinkingBudget(body) {
  const message = body.reasoning_budget_message;
  if (given(message) && (typeof message !== 'string' || message.length > MAX_BUDGET_MESSAGE)) {
    throw badParam('reasoning_budget_message', `reasoning_budget_message must be a string of at most ${MAX_BUDGET_MESSAGE} characters`);
  }
  // The thought is read from the text: a closing marker in the message would end it there.
  if (message?.includes('<channel|>')) throw badParam('reasoning_budget_message', 'reasoning_budget_message must not contain <channel|>: the gateway writes it after the message');
  const tokens = budgetTokens(body);
  return tokens === null ? null : { tokens, message: message ?? '' };
}
