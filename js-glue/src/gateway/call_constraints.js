// A request's tool_choice "required" or named function as the constraints its choices' outputs keep
// to: only Gemma 4 tool calls, their arguments following the tools' parameters schemas
// (tokens/grammar/gemma4_calls.js), with the engine's refusals as 400s naming the keyword at fault.
import { SchemaError } from '../tokens/grammar/schema_check.js';
import { OpenAIError } from './errors.js';

/**
 * One constraint per choice (request.n of them), or null when tool_choice leaves the answer free.
 * `grammar`: the gateway's GrammarEngine, null where the host has none.
 * @example const constraints = await callConstraints(engine.grammar, request);
 */
export async function callConstraints(grammar, request) {
  const choice = request.toolChoice;
  if (choice !== 'required' && !(typeof choice === 'object' && choice !== null)) return null;
  if (!grammar) {
    throw new OpenAIError(400, 'tool_choice "required" or a named function is not supported by this host (it has no grammar engine)', { param: 'tool_choice', code: 'unsupported_parameter' });
  }
  const tools = choice === 'required' ? request.tools : request.tools.filter((t) => t.function.name === choice.function.name);
  // A named function is called once, as OpenAI does.
  const parallel = choice === 'required' && request.parallelToolCalls;
  const constraints = [];
  try {
    for (let i = 0; i < (request.n ?? 1); i++) constraints.push(await grammar.callConstraint(tools, { parallel }));
    return constraints;
  } catch (error) {
    for (const c of constraints) c.close();
    if (!(error instanceof SchemaError)) throw error;
    const param = error.code === 'unsupported_parameter' ? 'tool_choice' : 'tools';
    throw new OpenAIError(400, error.message, { param, code: error.code });
  }
}
