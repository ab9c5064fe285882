// The tool fields of a /v1/chat/completions body, checked: `tools` (OpenAI's function tools),
// `tool_choice` and `parallel_tool_calls`. The tools are declared to the model through its chat
// template. tool_choice "auto" and "none" need nothing of the sampler; "required" and a named
// function constrain the output to calls (call_constraints.js), which leaves no room for a
// response_format.
import { given, isObject } from './body_values.js';
import { badParam, OpenAIError } from './errors.js';

const MAX_TOOLS = 128;  // OpenAI's limit
const FUNCTION_NAME = /^[A-Za-z0-9_-]{1,64}$/;

function tool(t, i) {
  const param = `tools[${i}]`;
  if (!isObject(t) || t.type !== 'function') throw badParam(`${param}.type`, `${param}.type must be "function" (the only tool type this gateway has)`);
  const f = t.function;
  if (!isObject(f)) throw badParam(`${param}.function`, `${param}.function must be {name, description?, parameters?}`);
  if (typeof f.name !== 'string' || !FUNCTION_NAME.test(f.name)) {
    throw badParam(`${param}.function.name`, `${param}.function.name must be 1 to 64 letters, digits, underscores or dashes`);
  }
  if (given(f.description) && typeof f.description !== 'string') throw badParam(`${param}.function.description`, `${param}.function.description must be a string`);
  if (given(f.parameters) && !isObject(f.parameters)) throw badParam(`${param}.function.parameters`, `${param}.function.parameters must be a JSON Schema object`);
  if (given(f.strict) && typeof f.strict !== 'boolean') throw badParam(`${param}.function.strict`, `${param}.function.strict must be true or false`);
  const out = { type: 'function', function: { name: f.name } };
  if (given(f.description)) out.function.description = f.description;
  if (given(f.parameters)) out.function.parameters = f.parameters;
  if (f.strict === true) out.function.strict = true;
  return out;
}

function tools(body) {
  const v = body.tools;
  if (!given(v)) return [];
  if (!Array.isArray(v) || v.length > MAX_TOOLS) throw badParam('tools', `tools must be an array of at most ${MAX_TOOLS} function tools`);
  const checked = v.map(tool);
  const names = new Set();
  checked.forEach(({ function: { name } }, i) => {
    if (names.has(name)) throw badParam(`tools[${i}].function.name`, `tools[${i}].function.name "${name}" is declared twice`);
    names.add(name);
  });
  return checked;
}

function toolChoice(body, declared) {
  const v = body.tool_choice;
  if (!given(v)) return declared.length > 0 ? 'auto' : 'none';
  if (v === 'auto' || v === 'none') return v;
  const forced = v === 'required' || (isObject(v) && v.type === 'function' && isObject(v.function) && typeof v.function.name === 'string');
  if (forced && declared.length === 0) throw badParam('tool_choice', 'tool_choice "required" or a named function needs tools');
  if (forced && given(body.response_format) && body.response_format?.type !== 'text') {
    throw new OpenAIError(400, 'tool_choice "required" or a named function makes the answer tool calls, which cannot also follow response_format', { param: 'tool_choice', code: 'unsupported_parameter' });
  }
  if (v === 'required') return v;
  if (forced) {
    if (!declared.some((t) => t.function.name === v.function.name)) throw badParam('tool_choice', `tool_choice names "${v.function.name}", which is not in tools`);
    return { type: 'function', function: { name: v.function.name } };
  }
  throw badParam('tool_choice', 'tool_choice must be "auto", "none", "required" or {type: "function", function: {name}}');
}

/**
 * The tool fields of a chat body -> {tools: [{type: 'function', function: {name, description?,
 * parameters?, strict?}}], toolChoice: 'auto' | 'none' | 'required' | {type: 'function', function: {name}},
 * parallelToolCalls}; a 400 OpenAIError naming the field otherwise.
 * @example toolParams({ tools: [{ type: 'function', function: { name: 'now' } }] }) // { tools: [...], toolChoice: 'auto', parallelToolCalls: true }
 */
export function toolParams(body) {
  const declared = tools(body);
  const v = body.parallel_tool_calls;
  if (given(v) && typeof v !== 'boolean') throw badParam('parallel_tool_calls', `parallel_tool_calls must be true or false, got ${JSON.stringify(v)}`);
  return { tools: declared, toolChoice: toolChoice(body, declared), parallelToolCalls: v ?? true };
}
