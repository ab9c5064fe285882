// A request's tool_choice as the constraints its choices' outputs keep to (tokens/grammar/
// gemma4_calls.js), with the engine's refusals as 400s naming the keyword at fault: "required" or
// a named function, only Gemma 4 tool calls, their arguments following the tools' parameters
// schemas; "auto" with a tool declared `strict: true`, any text, and the arguments of a call the
// model starts to a strict tool following its schema. A response_format leaves no room for calls,
// so it decides the constraint then (response_format.js).
import { SchemaError } from '../tokens/grammar/schema_check.js';
import { OpenAIError } from './errors.js';

/**
 * One constraint per choice (request.n of them), or null when tool_choice leaves the answer free.
 * `grammar`: the gateway's GrammarEngine, null where the host has none.
 * @example const constraints = await callConstraints(engine.grammar, request);
 */
export async function callConstraints(grammar, request) {
  const choice = request.toolChoice;
  const free = choice === 'auto' && request.tools.some((t) => t.function.strict) && !request.responseFormat;
  if (choice !== 'required' && !(typeof choice === 'object' && choice !== null) && !free) return null;
  if (!grammar) {
    // Strict tools on a host without the engine are read as written, as by a peer without grammars.
    if (free) return null;
    throw new OpenAIError(400, 'tool_choice "required" or a named function is not supported by this host (it has no grammar engine)', { param: 'tool_choice', code: 'unsupported_parameter' });
  }
  const tools = typeof choice === 'object' ? request.tools.filter((t) => t.function.name === choice.function.name) : request.tools;
  // A named function is called once, as OpenAI does.
  const parallel = (choice === 'required' || free) && request.parallelToolCalls;
  const constraints = [];
  try {
    for (let i = 0; i < (request.n ?? 1); i++) constraints.push(await grammar.callConstraint(tools, { parallel, free }));
    return constraints;
  } catch (error) {
    for (const c of constraints) c.close();
    if (!(error instanceof SchemaError)) throw error;
    // A model without Gemma 4's call tokens writes no calls this grammar could shape.
    if (free && error.code === 'unsupported_parameter') return null;
    const param = error.code === 'unsupported_parameter' ? 'tool_choice' : 'tools';
    throw new OpenAIError(400, error.message, { param, code: error.code });
  }
}
