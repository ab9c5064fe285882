// What a chat template is given of a request, in the shape llama.cpp's common chat layer gives it
// (common/chat.cpp: a message's to_json_oaicompat, the tools' to_json_oaicompat, a call's
// arguments parsed into an object, the content of a message with calls never null), with every
// piece of client text marked as untrusted (chat_marks.js): contents, earlier thoughts, tool
// descriptions and schemas' strings, call arguments, tool results.
//
// What the template compares or sorts stays unmarked, so that it decides as llama.cpp's does: a
// schema's "type" (checked to be a word), object keys (sorted by the template's dictsort) and
// function names (OpenAI's rule: letters, digits, "_" and "-"). None of these may hold "<" or "[",
// with which every control and marker token begins, so none can become one.
import { ChatContentError, marked, MAX_MEDIA_ITEMS, mediaMark } from './chat_marks.js';

const FUNCTION_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const SCHEMA_TYPE = /^[A-Za-z]+$/;
const MAX_DEPTH = 64;

const isObject = (v) => typeof v === 'object' && v !== null && !Array.isArray(v);

function functionName(name, param) {
  if (typeof name !== 'string' || !FUNCTION_NAME.test(name)) {
    throw new ChatContentError(param, `${param} must be 1 to 64 letters, digits, underscores or dashes, got ${JSON.stringify(name)}`);
  }
  return name;
}

function checkedKey(key, param) {
  if (/[<[\uFDD0\uFDD1]/.test(key)) {
    throw new ChatContentError(param, `${param} has the key ${JSON.stringify(key)}: keys may not hold "<", "[" or U+FDD0/U+FDD1`);
  }
  return key;
}

const schemaType = (v) => (typeof v === 'string' && SCHEMA_TYPE.test(v)) || (Array.isArray(v) && v.every((t) => typeof t === 'string' && SCHEMA_TYPE.test(t)));

// A schema's list of types as Python's Jinja and llama.cpp's engine print a list, where a
// template upper-cases it as one string (@huggingface/jinja has no `upper` for a list):
// ["string", "null"] -> "['string', 'null']".
const printedList = (types) => `[${types.map((t) => `'${t}'`).join(', ')}]`;

// A JSON value with its strings marked; in a schema (`schema`), the value of a "type" key left
// as is, a list of types printed as one string except in an "items" schema (`items`), where
// Gemma 4's template takes the list itself.
function markedValue(value, param, schema, depth = 0, items = false) {
  if (depth > MAX_DEPTH) throw new ChatContentError(param, `${param} is nested more than ${MAX_DEPTH} deep`);
  if (typeof value === 'string') return marked(value, param);
  if (Array.isArray(value)) return value.map((v) => markedValue(v, param, schema, depth + 1));
  if (!isObject(value)) return value;
  const out = {};
  for (const [key, v] of Object.entries(value)) {
    checkedKey(key, param);
    if (schema && key === 'type' && !isObject(v)) {
      if (!schemaType(v)) throw new ChatContentError(param, `${param} has a "type" that is not a word or an array of words: ${JSON.stringify(v)}`);
      out[key] = Array.isArray(v) && !items ? printedList(v) : v;
    } else {
      out[key] = markedValue(v, param, schema, depth + 1, schema && key === 'items');
    }
  }
  return out;
}

// A call's arguments as the template takes them: an object (a JSON string is parsed, as llama.cpp does).
function callArguments(args, param) {
  let value = args;
  if (typeof args === 'string') {
    try {
      value = JSON.parse(args);
    } catch (error) {
      throw new ChatContentError(param, `${param} is not valid JSON: ${error.message}`);
    }
  }
  if (!isObject(value)) throw new ChatContentError(param, `${param} must be a JSON object`);
  return markedValue(value, param, false);
}

function toolCall(call, param) {
  const out = {
    type: 'function',
    function: { name: functionName(call?.function?.name, `${param}.function.name`), arguments: callArguments(call.function.arguments, `${param}.function.arguments`) },
  };
  if (typeof call.id === 'string' && call.id !== '') out.id = call.id;
  return out;
}

// Content parts with media as llama.cpp's common chat layer joins them for the template
// (common_chat_msg::to_json_oaicompat): text parts a newline apart, none beside a media item;
// each image's or audio clip's mark pushed onto `media` with its part.
function joinedParts(parts, param, media) {
  let text = '';
  let lastWasMedia = false;
  for (const part of parts) {
    if (part.type === 'image' || part.type === 'audio') {
      if (media.length === MAX_MEDIA_ITEMS) throw new ChatContentError(part.param, `a chat holds at most ${MAX_MEDIA_ITEMS} media items`);
      text += mediaMark(media.length);
      media.push(part);
      lastWasMedia = true;
      continue;
    }
    if (!lastWasMedia && text !== '') text += '\n';
    text += marked(part.text, param);
    lastWasMedia = false;
  }
  return text;
}

/**
 * Chat messages [{role, content, reasoning_content?, tool_calls?, tool_call_id?, name?,
 * tool_responses?, at?}] (content a string, text, image and audio parts, or null; `at` the index
 * errors name, when not the message's own) -> the messages the template renders, client text
 * marked, and each image or audio part pushed onto `media` where its mark stands (chat_marks.js, mediaMark). Throws
 * ChatContentError naming the field it cannot carry.
 * @example templateMessages([{ role: 'user', content: 'Hi' }]) // [{ role: 'user', content: '\uFDD0Hi\uFDD1' }]
 */
export function templateMessages(messages, media = []) {
  return messages.map((m, i) => {
    const param = `messages[${m.at ?? i}]`;
    const out = { role: m.role };
    // Absent only from an assistant message that folds a tool round with no answer after it.
    if (m.content !== undefined || !m.tool_responses) {
      out.content = Array.isArray(m.content) ? joinedParts(m.content, `${param}.content`, media) : marked(m.content ?? '', `${param}.content`);
    }
    if (m.reasoning_content) out.reasoning_content = marked(m.reasoning_content, `${param}.reasoning_content`);
    if (m.name) out.name = marked(m.name, `${param}.name`);
    // Compared with the calls' ids, never rendered.
    if (m.tool_call_id) out.tool_call_id = m.tool_call_id;
    if (m.tool_calls?.length) out.tool_calls = m.tool_calls.map((c, j) => toolCall(c, `${param}.tool_calls[${j}]`));
    // The results folded into an assistant message for Gemma 4's first templates (gemma4_tool_responses.js).
    if (m.tool_responses) {
      out.tool_responses = m.tool_responses.map(({ name, response, at }) => ({
        name: marked(name, `messages[${at}].tool_call_id`),
        response: markedValue(response, `messages[${at}].content`, false),
      }));
    }
    return out;
  });
}

/**
 * OpenAI tools [{type: 'function', function: {name, description?, parameters?}}] -> the tools the
 * template declares (description '' and parameters {} when absent, as llama.cpp gives them), their
 * text marked; undefined when there are none, as llama.cpp leaves `tools` out then.
 * @example templateTools([{ type: 'function', function: { name: 'now' } }]) // [{ type: 'function', function: { name: 'now', description: '', parameters: {} } }]
 */
export function templateTools(tools) {
  if (!tools?.length) return undefined;
  return tools.map((tool, i) => {
    const param = `tools[${i}]`;
    if (tool?.type !== 'function' || !isObject(tool.function)) throw new ChatContentError(`${param}.type`, `${param} must be {type: "function", function: {name, description?, parameters?}}`);
    const f = tool.function;
    return {
      type: 'function',
      function: {
        name: functionName(f.name, `${param}.function.name`),
        description: marked(f.description ?? '', `${param}.function.description`),
        parameters: markedValue(f.parameters ?? {}, `${param}.function.parameters`, true),
      },
    };
  });
}
