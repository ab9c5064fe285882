// A JSON schema checked before it reaches the grammar engine. XGrammar's WebAssembly build
// aborts its whole module on a schema it cannot convert (an unknown type, a $ref that resolves
// nowhere, a regex feature it lacks) and silently ignores keywords it does not enforce (`not`,
// `if`, `format`), which would let through output that fails the schema. So only the keywords
// it enforces pass, each value of the shape it expects, and the schema's size is bounded: the
// engine's compile time and memory grow with the grammar the schema becomes.

/** A schema the engine cannot take: `keyword` names the first offending keyword. */
export class SchemaError extends Error {
  constructor(keyword, message, code = 'unsupported_schema') {
    super(message);
    this.keyword = keyword;
    this.code = code;
  }
}

/** Most schema nodes (objects and enum/const values) one schema may hold. */
export const MAX_SCHEMA_NODES = 2000;
/** Deepest nesting of schema nodes. */
export const MAX_SCHEMA_DEPTH = 32;

const TYPES = new Set(['object', 'array', 'string', 'integer', 'number', 'boolean', 'null']);
// Keywords that only document the schema: the engine may ignore them without letting bad output through.
const ANNOTATIONS = new Set(['title', 'description', 'default', 'examples', '$schema', '$id', '$comment']);
// Keywords XGrammar 0.1.27 turns into grammar rules.
const ENFORCED = new Set([
  'type', 'properties', 'required', 'additionalProperties', 'items', 'prefixItems', 'minItems', 'maxItems',
  'enum', 'const', 'anyOf', 'oneOf', '$ref', '$defs', 'definitions', 'minLength', 'maxLength',
  'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum',
]);

const isObject = (v) => typeof v === 'object' && v !== null && !Array.isArray(v);
const isCount = (v) => Number.isSafeInteger(v) && v >= 0;

/**
 * Throws a SchemaError naming the first keyword the engine cannot take, or when the schema is
 * bigger than MAX_SCHEMA_NODES / MAX_SCHEMA_DEPTH; returns nothing for a schema it can take.
 * @example checkSchema({ type: 'object', properties: { a: { type: 'string' } } })
 * @example checkSchema({ not: { type: 'string' } }) // throws SchemaError, keyword 'not'
 */
export function checkSchema(schema) {
  let nodes = 0;
  const count = (n, path) => {
    nodes += n;
    if (nodes > MAX_SCHEMA_NODES) throw new SchemaError(path, `the schema is too large: more than ${MAX_SCHEMA_NODES} subschemas and enum values`, 'schema_too_large');
  };
  const walk = (node, path, depth) => {
    if (typeof node === 'boolean') return;
    if (!isObject(node)) throw new SchemaError(path, `${path} must be a schema (an object or a boolean)`, 'invalid_schema');
    if (depth > MAX_SCHEMA_DEPTH) throw new SchemaError(path, `the schema nests deeper than ${MAX_SCHEMA_DEPTH} levels`, 'schema_too_large');
    count(1, path);
    for (const [keyword, value] of Object.entries(node)) {
      const at = `${path}.${keyword}`;
      if (ANNOTATIONS.has(keyword)) continue;
      if (!ENFORCED.has(keyword)) throw new SchemaError(keyword, `the JSON schema keyword "${keyword}" (at ${at}) is not supported for constrained decoding`);
      checkKeyword(keyword, value, at, (child, childPath) => walk(child, childPath, depth + 1), count);
    }
    if (typeof node.$ref === 'string' && !resolves(schema, node.$ref)) throw new SchemaError('$ref', `${path}.$ref "${node.$ref}" points nowhere in the schema`, 'invalid_schema');
  };
  walk(schema, 'schema', 0);
}

function checkKeyword(keyword, value, at, walk, count) {
  const bad = (expected) => new SchemaError(keyword, `${at} must be ${expected}`, 'invalid_schema');
  switch (keyword) {
    case 'type': {
      const types = Array.isArray(value) ? value : [value];
      if (types.length === 0 || !types.every((t) => TYPES.has(t))) throw bad(`one of ${[...TYPES].join(', ')} (or an array of them)`);
      return;
    }
    case 'properties':
    case '$defs':
    case 'definitions':
      if (!isObject(value)) throw bad('an object of schemas');
      for (const [name, child] of Object.entries(value)) walk(child, `${at}.${name}`);
      return;
    case 'required':
      if (!Array.isArray(value) || !value.every((v) => typeof v === 'string')) throw bad('an array of property names');
      return;
    case 'additionalProperties':
    case 'items':
      walk(value, at);
      return;
    case 'prefixItems':
    case 'anyOf':
    case 'oneOf':
      if (!Array.isArray(value) || value.length === 0) throw bad('a non-empty array of schemas');
      value.forEach((child, i) => walk(child, `${at}[${i}]`));
      return;
    case 'enum':
      if (!Array.isArray(value) || value.length === 0) throw bad('a non-empty array');
      count(value.length, at);
      return;
    case 'const':
      count(1, at);
      return;
    case 'minItems':
    case 'maxItems':
    case 'minLength':
    case 'maxLength':
      if (!isCount(value)) throw bad('an integer ≥ 0');
      return;
    case '$ref':
      if (typeof value !== 'string' || !value.startsWith('#')) throw bad('a reference inside the schema ("#/$defs/...")');
      return;
    default:  // minimum, maximum, exclusiveMinimum, exclusiveMaximum
      if (typeof value !== 'number' || !Number.isFinite(value)) throw bad('a finite number');
  }
}

// Whether a local JSON pointer ("#", "#/$defs/a") names a schema inside `root`.
function resolves(root, ref) {
  if (ref === '#') return true;
  if (!ref.startsWith('#/')) return false;
  let node = root;
  for (const raw of ref.slice(2).split('/')) {
    const part = decodeURIComponent(raw).replaceAll('~1', '/').replaceAll('~0', '~');
    if (!isObject(node) || !Object.hasOwn(node, part)) return false;
    node = node[part];
  }
  return isObject(node) || typeof node === 'boolean';
}
