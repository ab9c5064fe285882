// A command's options are one schema: per option its kind (options/kinds.js) with the kind's
// bounds or choices, its default, its help line and, for serve and gateway, the environment
// variable it may also come from. parseArgs only splits the command line; every value is then
// read here, against the schema, so no command sees a value it did not declare.
import { KINDS } from './kinds.js';

/**
 * The node:util parseArgs options of a schema: every value arrives as text, a switch as true.
 * @example parseArgs({ args, options: parseArgsOptions(schema), allowPositionals: true })
 */
export function parseArgsOptions(schema) {
  return Object.fromEntries(Object.entries(schema).map(([name, spec]) => [name, {
    type: spec.kind === 'boolean' ? 'boolean' : 'string',
    ...(spec.kind === 'list' ? { multiple: true } : {}),
  }]));
}

// The option's text and where it came from: the command line first, else its variable (set and
// not empty), else nothing.
function given(name, spec, values, env) {
  const value = values[name];
  if (value !== undefined) return { value, label: `--${name}`, fromEnv: false };
  const text = spec.env ? env[spec.env] : undefined;
  if (text !== undefined && text !== '') return { value: text, label: spec.env, fromEnv: true };
  return null;
}

/**
 * parseArgs' values (text, true for a switch, an array for a list) and the environment -> each
 * option's value of its kind, or its default when given neither way. A value not of its kind
 * is refused naming the option (or the variable it came from), the value and what is accepted.
 * @example readOptions({ threads: { kind: 'integer', min: 1, max: 256 } }, { threads: '4' }) // { threads: 4 }
 */
export function readOptions(schema, values, env = {}) {
  const read = {};
  for (const [name, spec] of Object.entries(schema)) {
    const source = given(name, spec, values, env);
    if (source === null) {
      read[name] = spec.default ?? (spec.kind === 'boolean' ? false : undefined);
      continue;
    }
    // A switch on the command line is on; only a variable's text is read.
    if (spec.kind === 'boolean' && !source.fromEnv) {
      read[name] = true;
      continue;
    }
    const kind = KINDS[spec.kind];
    const texts = Array.isArray(source.value) ? source.value : [source.value];
    const each = texts.map((text) => {
      const value = kind.read(text, spec);
      if (value === undefined) throw new Error(`${source.label} must be ${kind.describe(spec)}, got ${JSON.stringify(text)}`);
      return value;
    });
    read[name] = spec.kind === 'list' ? each : each[0];
  }
  return read;
}
