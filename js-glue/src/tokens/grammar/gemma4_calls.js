// Gemma 4 tool calls as an EBNF grammar for the engine: `<|tool_call>call:NAME{key:value,…}<tool_call|>`
// with each call's arguments following its function's `parameters` schema, written in Gemma 4's
// value syntax (chat/gemma4_values.js reads it back: bare keys, strings between `<|"|>`). XGrammar
// converts JSON schemas to JSON and Qwen's XML only, so the schema is turned into rules here, for
// the keywords below; any other keyword gets a SchemaError naming it rather than going unenforced.
// The three markers are single tokens; the engine's vocabulary gives them the ASCII control
// characters of MARKERS as text, so the grammar can ask for them and no spelled-out text can pass
// for them (engine.js refuses any other token that could write those characters). ASCII, since
// XGrammar's character classes are exact on ASCII only: a class excluding a character above 127
// lets it through.
import { SchemaError } from './schema_check.js';

/** The marker tokens' pieces and the one character each stands for in grammars. */
export const MARKERS = Object.freeze({ '<|"|>': '\x01', '<|tool_call>': '\x02', '<tool_call|>': '\x03' });
const [QUOTE, OPEN, CLOSE] = Object.values(MARKERS);

const TAKEN = new Set(['type', 'properties', 'required', 'additionalProperties', 'items', 'enum', 'const', 'anyOf', 'oneOf',
  'minLength', 'maxLength', 'minItems', 'maxItems']);
const IGNORED = new Set(['title', 'description', 'default', 'examples', '$schema', '$id', '$comment']);
const KEY = /^[^:}\x01-\x03]+$/;
// A string's characters: none of the markers, which would end it or read as a call's edge.
const CHAR = '[^\\u0001\\u0002\\u0003]';

// An EBNF string literal.
const lit = (text) => JSON.stringify(text);

// Any Gemma 4 value, as llama.cpp's gemma4-value reads one (without the optional whitespace, which a
// weak model could pad with forever). Numbers have at most 18 digits before the point and a
// two-digit exponent: a client's JSON parser reads them as finite numbers (a longer one is Infinity).
const ANY = [
  `g_value ::= g_string | g_dict | g_array | g_number | "true" | "false" | "null"`,
  `g_string ::= ${lit(QUOTE)} ${CHAR}* ${lit(QUOTE)}`,
  `g_dict ::= "{" (g_member ("," g_member)*)? "}"`,
  `g_member ::= [^:}\\u0001\\u0002\\u0003]+ ":" g_value`,
  `g_array ::= "[" (g_value ("," g_value)*)? "]"`,
  `g_number ::= g_integer ("." [0-9]+)? ([eE] [+-]? [0-9] [0-9]?)?`,
  `g_integer ::= "-"? ("0" | [1-9] [0-9]{0,17})`,
];

/** A JSON value written in Gemma 4's syntax (for enum and const). */
function gemma4Text(v) {
  if (typeof v === 'string') return QUOTE + v + QUOTE;
  if (Array.isArray(v)) return `[${v.map(gemma4Text).join(',')}]`;
  if (v !== null && typeof v === 'object') return `{${Object.entries(v).map(([k, x]) => `${k}:${gemma4Text(x)}`).join(',')}}`;
  return JSON.stringify(v);
}

const repeat = (item, min = 0, max) => {
  if (max === undefined) return min === 0 ? `${item}*` : `${item}{${min},}`;
  return `${item}{${min},${max}}`;
};

class Rules {
  lines = [...ANY];
  #n = 0;

  add(body) {
    const name = `s${this.#n++}`;
    this.lines.push(`${name} ::= ${body}`);
    return name;
  }

  // The rule of one schema node at `path`.
  value(schema, path) {
    if (schema === true) return 'g_value';
    if (schema === false || typeof schema !== 'object' || schema === null) throw new SchemaError(path, `${path} allows no value`, 'invalid_schema');
    for (const keyword of Object.keys(schema)) {
      if (!TAKEN.has(keyword) && !IGNORED.has(keyword)) throw new SchemaError(keyword, `the JSON schema keyword "${keyword}" (at ${path}) is not supported for tool call arguments`);
    }
    if ('const' in schema) return this.add(lit(gemma4Text(schema.const)));
    if (Array.isArray(schema.enum)) return this.add(schema.enum.map((v) => lit(gemma4Text(v))).join(' | '));
    const alternatives = schema.anyOf ?? schema.oneOf;
    if (Array.isArray(alternatives)) return this.add(alternatives.map((s, i) => this.value(s, `${path}.anyOf[${i}]`)).join(' | '));
    const types = Array.isArray(schema.type) ? schema.type : schema.type === undefined ? [] : [schema.type];
    if (types.length === 0) return schema.properties ? this.object(schema, path) : 'g_value';
    return this.add(types.map((type) => this.typed(type, schema, path)).join(' | '));
  }

  typed(type, schema, path) {
    switch (type) {
      case 'string': return this.add(`${lit(QUOTE)} ${repeat(CHAR, schema.minLength, schema.maxLength)} ${lit(QUOTE)}`);
      case 'number': return 'g_number';
      case 'integer': return 'g_integer';
      case 'boolean': return this.add('"true" | "false"');
      case 'null': return this.add('"null"');
      case 'array': {
        const item = schema.items === undefined ? 'g_value' : this.value(schema.items, `${path}.items`);
        const min = schema.minItems ?? 0;
        const max = schema.maxItems;
        if (max === 0) return this.add('"[" "]"');
        const rest = repeat(`("," ${item})`, Math.max(min - 1, 0), max === undefined ? undefined : max - 1);
        return this.add(min === 0 ? `"[" (${item} ${rest})? "]"` : `"[" ${item} ${rest} "]"`);
      }
      case 'object': return this.object(schema, path);
      default: throw new SchemaError('type', `${path}.type "${type}" is not a JSON schema type`, 'invalid_schema');
    }
  }

  // The declared properties in their order, the required ones always, the others optional: output
  // that always validates. Without declared properties, any dict (unless additionalProperties is false).
  object(schema, path) {
    const entries = Object.entries(schema.properties ?? {});
    if (entries.length === 0) return schema.additionalProperties === false ? this.add('"{" "}"') : 'g_dict';
    const required = new Set(schema.required ?? []);
    const members = entries.map(([key, sub]) => {
      if (!KEY.test(key)) throw new SchemaError('properties', `${path}.properties "${key}" cannot be written as a Gemma 4 key (it holds ":" or "}")`, 'invalid_schema');
      return { member: this.add(`${lit(`${key}:`)} ${this.value(sub, `${path}.properties.${key}`)}`), required: required.has(key) };
    });
    // after[i]: members i… each preceded by a comma; first[i]: members i…, the first without one.
    let after = '""';
    let first = '""';
    for (let i = members.length - 1; i >= 0; i--) {
      const { member, required: must } = members[i];
      const nextAfter = after;
      after = this.add(must ? `"," ${member} ${nextAfter}` : `("," ${member})? ${nextAfter}`);
      first = this.add(must ? `${member} ${nextAfter}` : `${member} ${nextAfter} | ${first}`);
    }
    return this.add(`"{" ${first} "}"`);
  }
}

// The rule of a function's arguments, a dict following its parameters schema (any dict without one).
function argumentsRule(rules, f) {
  const params = f.parameters ?? { type: 'object' };
  const at = `tools.${f.name}.parameters`;
  if (params.type !== undefined && params.type !== 'object') throw new SchemaError('type', `${at}.type must be "object": arguments are a dict`, 'invalid_schema');
  return rules.value({ type: 'object', ...params }, at);
}

/**
 * The EBNF of tool calls to `tools` (params.js's checked tools): one or more calls, or exactly one
 * when `parallel` is false. Throws a SchemaError naming a parameters keyword it cannot enforce.
 * @example callGrammar([{ type: 'function', function: { name: 'now', parameters: { type: 'object' } } }], { parallel: false })
 */
export function callGrammar(tools, { parallel = true } = {}) {
  const rules = new Rules();
  const calls = tools.map(({ function: f }) => rules.add(`${lit(`call:${f.name}`)} ${argumentsRule(rules, f)}`));
  const call = rules.add(`${lit(OPEN)} (${calls.join(' | ')}) ${lit(CLOSE)}`);
  return [`root ::= ${parallel ? `${call}+` : call}`, ...rules.lines].join('\n');
}

/**
 * XGrammar's structural tag for free text with calls in it (tool_choice "auto"): any text, and
 * once the model writes `<|tool_call>`, a call to one of `tools` whose arguments follow the
 * function's schema where it is strict (any dict where not); after the first call nothing more
 * when `parallel` is false.
 * @example Grammar.fromStructuralTag(callTag(tools, { parallel: true }))
 */
export function callTag(tools, { parallel = true } = {}) {
  const tags = tools.map(({ function: f }) => {
    const rules = new Rules();
    const args = argumentsRule(rules, f.strict ? f : { name: f.name });
    const grammar = [`root ::= ${args}`, ...rules.lines].join('\n');
    return { type: 'tag', begin: `${OPEN}call:${f.name}`, content: { type: 'grammar', grammar }, end: CLOSE };
  });
  return { type: 'structural_tag', format: { type: 'triggered_tags', triggers: [OPEN], tags, at_least_one: false, stop_after_first: !parallel } };
}
