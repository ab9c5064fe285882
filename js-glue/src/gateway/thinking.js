// Whether the model thinks before it answers, from the switches clients send: OpenAI's
// `reasoning_effort` and `chat_template_kwargs.enable_thinking`, as llama.cpp's server and vLLM
// take them. Gemma 4's template has thinking on or off, no levels: any effort but "none" turns it
// on. Without either switch it is off, the template's own default (llama.cpp's server turns it on
// for any template that can think; vLLM leaves it to the template).
import { badParam, OpenAIError } from './errors.js';

const EFFORTS = ['none', 'minimal', 'low', 'medium', 'high'];

const isObject = (v) => typeof v === 'object' && v !== null && !Array.isArray(v);
const given = (v) => v !== undefined && v !== null;

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
