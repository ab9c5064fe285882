// A request's response_format as the constraints its choices' outputs keep to (tokens/grammar/),
// with the engine's refusals as 400s naming the schema keyword at fault.
import { SchemaError } from '../tokens/grammar/schema_check.js';
import { OpenAIError } from './errors.js';

/**
 * One constraint per choice (n of them) for `format` (params.js's responseFormat), or null for
 * free text. `grammar`: the gateway's GrammarEngine, null where the host has none. The schema is
 * compiled once; each choice gets its own state over it.
 * @example const constraints = await responseConstraints(engine.grammar, request.responseFormat, request.n);
 */
export async function responseConstraints(grammar, format, n = 1) {
  if (format === null) return null;
  if (!grammar) {
    throw new OpenAIError(400, `response_format ${format.type} is not supported by this host (it has no grammar engine)`, { param: 'response_format', code: 'unsupported_parameter' });
  }
  const constraints = [];
  try {
    for (let i = 0; i < n; i++) constraints.push(await grammar.constraint(format));
    return constraints;
  } catch (error) {
    for (const c of constraints) c.close();
    if (!(error instanceof SchemaError)) throw error;
    const param = format.type === 'json_schema' ? 'response_format.json_schema.schema' : 'response_format';
    throw new OpenAIError(400, error.message, { param, code: error.code });
  }
}
