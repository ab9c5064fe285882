// The messages of a /v1/chat/completions body, checked: OpenAI's roles (developer taken as
// system, as llama.cpp takes it), text content, image and audio parts, an assistant's tool calls and
// earlier thought, a tool's result answering a call. Each fault is a 400 naming the field. What
// the chat template needs of the values themselves (arguments that parse as a JSON object, names
// it can carry) is checked where it is rendered (tokens/chat_inputs.js), once.
import { given, isObject } from './body_values.js';
import { badParam } from './errors.js';

// The formats an input_audio part may name: OpenAI's wav and mp3, and FLAC (audio/decode_audio.js
// tells them apart by their bytes).
const AUDIO_FORMATS = ['wav', 'mp3', 'flac'];

const ROLES = ['system', 'developer', 'user', 'assistant', 'tool'];

// OpenAI's image detail levels (media.js turns them into soft-token budgets).
const IMAGE_DETAILS = ['auto', 'low', 'high'];

// Content: a string; an array of text parts, joined; or, with an image or audio clip among them,
// the parts [{type: 'text', text} | {type: 'image', url, detail, param} | {type: 'audio', data,
// format, param}] (param naming the part in errors; data the file's base64).
function content(value, param) {
  if (typeof value === 'string') return value;
  const shape = `${param} must be a string or an array of {type: "text", text}, {type: "image_url", image_url: {url}} and ` +
    '{type: "input_audio", input_audio: {data, format}} parts';
  if (!Array.isArray(value)) throw badParam(param, shape);
  const parts = value.map((p, j) => {
    const at = `${param}[${j}]`;
    if (isObject(p) && p.type === 'text' && typeof p.text === 'string') return { type: 'text', text: p.text };
    if (isObject(p) && p.type === 'image_url') {
      const url = typeof p.image_url === 'string' ? p.image_url : p.image_url?.url;
      if (typeof url !== 'string' || url === '') throw badParam(`${at}.image_url.url`, `${at}.image_url.url must be a non-empty string`);
      const detail = isObject(p.image_url) && p.image_url.detail !== undefined ? p.image_url.detail : 'auto';
      if (!IMAGE_DETAILS.includes(detail)) {
        throw badParam(`${at}.image_url.detail`, `${at}.image_url.detail must be ${IMAGE_DETAILS.join(', ')}, not ${JSON.stringify(detail)}`);
      }
      return { type: 'image', url, detail, param: `${at}.image_url.url` };
    }
    if (isObject(p) && p.type === 'input_audio') {
      const { data, format } = isObject(p.input_audio) ? p.input_audio : {};
      if (typeof data !== 'string' || data === '') throw badParam(`${at}.input_audio.data`, `${at}.input_audio.data must be a non-empty base64 string`);
      if (!AUDIO_FORMATS.includes(format)) {
        throw badParam(`${at}.input_audio.format`, `${at}.input_audio.format must be ${AUDIO_FORMATS.join(', ')}, not ${JSON.stringify(format)}`);
      }
      return { type: 'audio', data, format, param: `${at}.input_audio.data` };
    }
    throw badParam(at, shape);
  });
  return parts.some((p) => p.type !== 'text') ? parts : parts.map((p) => p.text).join('');
}

function nonEmptyString(v, param) {
  if (typeof v !== 'string' || v === '') throw badParam(param, `${param} must be a non-empty string`);
  return v;
}

function toolCalls(calls, param) {
  if (!Array.isArray(calls) || calls.length === 0) throw badParam(param, `${param} must be a non-empty array of {id, type: "function", function: {name, arguments}}`);
  return calls.map((c, j) => {
    const at = `${param}[${j}]`;
    if (!isObject(c) || c.type !== 'function' || !isObject(c.function)) throw badParam(at, `${at} must be {id, type: "function", function: {name, arguments}}`);
    if (typeof c.function.arguments !== 'string') throw badParam(`${at}.function.arguments`, `${at}.function.arguments must be a string of JSON`);
    return {
      id: nonEmptyString(c.id, `${at}.id`),
      type: 'function',
      function: { name: nonEmptyString(c.function.name, `${at}.function.name`), arguments: c.function.arguments },
    };
  });
}

function message(m, i) {
  const param = `messages[${i}]`;
  if (!isObject(m) || !ROLES.includes(m.role)) throw badParam(`${param}.role`, `${param}.role must be system, developer, user, assistant or tool`);
  const out = { role: m.role === 'developer' ? 'system' : m.role };
  const calls = m.role === 'assistant' && given(m.tool_calls) ? toolCalls(m.tool_calls, `${param}.tool_calls`) : null;
  // An assistant message that calls tools may have no content, as OpenAI sends it.
  out.content = calls && !given(m.content) ? null : content(m.content, `${param}.content`);
  if (calls) out.tool_calls = calls;
  if (m.role === 'assistant' && given(m.reasoning_content)) {
    if (typeof m.reasoning_content !== 'string') throw badParam(`${param}.reasoning_content`, `${param}.reasoning_content must be a string`);
    out.reasoning_content = m.reasoning_content;
  }
  if (m.role === 'tool') {
    if (Array.isArray(out.content)) throw badParam(`${param}.content`, `${param}.content: a tool's result is text; images and audio go in a user message`);
    out.tool_call_id = nonEmptyString(m.tool_call_id, `${param}.tool_call_id`);
    if (given(m.name)) out.name = nonEmptyString(m.name, `${param}.name`);
  }
  return out;
}

/**
 * body.messages checked -> [{role, content, tool_calls?, reasoning_content?, tool_call_id?, name?}]
 * (content a string, an array of text, image and audio parts where it holds media, or null for an
 * assistant's tool calls); a 400 OpenAIError naming the field.
 * @example chatMessages([{ role: 'developer', content: 'Be brief.' }, { role: 'user', content: 'Hi' }])
 */
export function chatMessages(messages) {
  if (!Array.isArray(messages) || messages.length === 0) throw badParam('messages', 'messages must be a non-empty array of {role, content}');
  return messages.map(message);
}
