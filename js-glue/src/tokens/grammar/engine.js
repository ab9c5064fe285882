// The grammar engine of one model's vocabulary: XGrammar (the @mlc-ai/web-xgrammar package, its
// C++ compiled to WebAssembly) given every token's text once, then JSON schemas compiled into
// token-level grammars on demand. Compiling costs about a second of CPU on a 262144-token
// vocabulary, so the last few compiled schemas are kept by their text. The engine's module
// aborts for good on an input it cannot take; schemas are checked before (schema_check.js),
// and a module that aborted anyway is loaded afresh for the next request.
import { checkSchema, SchemaError } from './schema_check.js';
import { Constraint } from './constraint.js';
import { callGrammar, callTag, MARKERS } from './gemma4_calls.js';

/** Compiled schemas kept for reuse. */
export const CACHED_GRAMMARS = 8;
/** Longest schema text compiled. */
export const MAX_SCHEMA_BYTES = 64 << 10;
/** Longest grammar (EBNF text) a schema may become: its compile time and memory grow with it. */
export const MAX_GRAMMAR_CHARS = 256 << 10;
/** Drafted tokens a constraint can check and take back at once (prompt lookup drafts ≤ 64). */
export const MAX_ROLLBACK = 64;

/**
 * Each token's text as XGrammar's "byte_fallback" vocabulary reads it: the vocabulary's own
 * pieces ("<0x0A>" for a byte token), and "" for a control token, which XGrammar then never
 * allows inside the text (control tokens decode to nothing, so the grammar could not see them).
 * Gemma 4's tool-call markers (user-defined tokens, which decode to their text) are given the
 * characters gemma4_calls.js's grammars ask for instead; other tokens that could write those
 * characters (a piece holding one, their byte tokens) are `clashing`: a call grammar refuses them.
 * -> {pieces, controlIds, markerIds, clashIds}
 */
const BYTE_PIECES = new Set(Object.values(MARKERS).map((c) => `<0x${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}>`));

function vocabulary(tokenizer) {
  const pieces = new Array(tokenizer.nVocab);
  const controlIds = new Set();
  const markerIds = new Set();
  const clashIds = new Set();
  const sentinels = new Set(Object.values(MARKERS));
  for (let id = 0; id < pieces.length; id++) {
    const piece = tokenizer.piece(id);
    const control = piece !== '' && tokenizer.decode([id]) === '';
    pieces[id] = control ? '' : piece;
    if (control) controlIds.add(id);
    if (Object.hasOwn(MARKERS, piece)) {
      pieces[id] = MARKERS[piece];
      markerIds.add(id);
    } else if (BYTE_PIECES.has(piece) || [...piece].some((c) => sentinels.has(c))) {
      clashIds.add(id);
    }
  }
  return { pieces, controlIds, markerIds, clashIds };
}

export class GrammarEngine {
  #load;
  #tokenizer;
  #endIds;
  #opened = null;  // Promise<{xg, compiler, controlIds, markerIds, clashIds}>
  #cache = new Map();  // key -> CompiledGrammar, oldest first

  /**
   * @param {() => Promise<object>} load a fresh XGrammar module namespace each call (grammar/load_node.js)
   * @param tokenizer the model's Tokenizer
   * @param {Set<number>} endIds the ids that end a turn: the only ones allowed once the text is complete
   * @example const engine = new GrammarEngine(loadXGrammar, pipeline.tokenizer, stopIds(pipeline.tokenizer));
   */
  constructor(load, tokenizer, endIds) {
    this.#load = load;
    this.#tokenizer = tokenizer;
    this.#endIds = [...endIds];
  }

  #open() {
    this.#opened ??= (async () => {
      const xg = await this.#load();
      const { pieces, controlIds, markerIds, clashIds } = vocabulary(this.#tokenizer);
      const info = await xg.TokenizerInfo.createTokenizerInfo(pieces, 'byte_fallback', false, this.#tokenizer.nVocab, this.#endIds);
      const compiler = await xg.GrammarCompiler.createGrammarCompiler(info, false);
      return { xg, compiler, controlIds, markerIds, clashIds };
    })();
    this.#opened.catch(() => {
      this.#opened = null;
    });
    return this.#opened;
  }

  /**
   * A constraint for one request's output: `format` {type: 'json_object'} (any JSON object) or
   * {type: 'json_schema', schema, strict}. Throws a SchemaError for a schema the engine cannot
   * take or that would compile too large.
   * @example const c = await engine.constraint({ type: 'json_schema', schema, strict: true });
   */
  async constraint(format) {
    const schema = format.type === 'json_object' ? { type: 'object' } : format.schema;
    const text = JSON.stringify(schema);
    if (new TextEncoder().encode(text).length > MAX_SCHEMA_BYTES) {
      throw new SchemaError('schema', `the schema is too large: its JSON is over ${MAX_SCHEMA_BYTES} bytes`, 'schema_too_large');
    }
    checkSchema(schema);
    const strict = format.type === 'json_schema' && format.strict === true;
    // Compact JSON (no free whitespace): a weak model could otherwise pad forever.
    const compiled = await this.#compiled(`json${strict ? 1 : 0}${text}`, (xg) => xg.Grammar.fromJSONSchema(text, false, -1, undefined, strict));
    const { xg, controlIds, markerIds } = await this.#open();
    const matcher = await xg.GrammarMatcher.createGrammarMatcher(compiled, undefined, false, MAX_ROLLBACK);
    // The markers have text for call grammars; in JSON they would be control tokens inside a string.
    return new Constraint(matcher, this.#tokenizer.nVocab, { refused: controlIds, forbidden: markerIds });
  }

  /**
   * A constraint for Gemma 4 tool calls to `tools` (params.js's checked tools), one call at most
   * when `parallel` is false. Without `free` (tool_choice "required" or a named function) the
   * answer is only calls, one or more, each call's arguments following its function's parameters
   * schema; with `free` (tool_choice "auto") it is any text, and a call the model starts follows
   * the schema of a function declared `strict`. Throws a SchemaError for a parameters schema the
   * grammar cannot enforce.
   * @example const c = await engine.callConstraint(request.tools, { parallel: request.parallelToolCalls });
   */
  async callConstraint(tools, { parallel = true, free = false } = {}) {
    for (const { function: f } of tools) if (f.parameters !== undefined && (f.strict || !free)) checkSchema(f.parameters);
    const { markerIds } = await this.#open();
    if (markerIds.size !== Object.keys(MARKERS).length) {
      throw new SchemaError('tools', 'this model\'s vocabulary has no Gemma 4 tool-call marker tokens, so calls cannot be enforced', 'unsupported_parameter');
    }
    let compiled;
    if (free) {
      const tag = callTag(tools, { parallel });
      compiled = await this.#compiled(`tag${JSON.stringify(tag)}`, (xg) => xg.Grammar.fromStructuralTag(tag));
    } else {
      const ebnf = callGrammar(tools, { parallel });
      compiled = await this.#compiled(`calls${ebnf}`, (xg) => xg.Grammar.fromEBNF(ebnf));
    }
    const { xg, controlIds, clashIds } = await this.#open();
    const matcher = await xg.GrammarMatcher.createGrammarMatcher(compiled, undefined, false, MAX_ROLLBACK);
    const refused = new Set([...controlIds].filter((id) => !markerIds.has(id)));
    return new Constraint(matcher, this.#tokenizer.nVocab, { refused, forbidden: clashIds });
  }

  // The compiled grammar cached under `key`, made by `make(xg)` (a Grammar) on a miss.
  async #compiled(key, make) {
    const hit = this.#cache.get(key);
    if (hit) {
      this.#cache.delete(key);
      this.#cache.set(key, hit);
      return hit;
    }
    const { xg, compiler } = await this.#open();
    let compiled;
    try {
      const grammar = await make(xg);
      try {
        if (grammar.toString().length > MAX_GRAMMAR_CHARS) {
          throw new SchemaError('schema', `the schema is too large: its grammar is over ${MAX_GRAMMAR_CHARS} characters`, 'schema_too_large');
        }
        compiled = await compiler.compileGrammar(grammar);
      } finally {
        grammar.dispose();
      }
    } catch (error) {
      if (error instanceof SchemaError) throw error;
      // The module aborted: every handle it gave is dead. The next request loads it anew.
      this.#opened = null;
      this.#cache.clear();
      throw new SchemaError('schema', `the grammar engine could not take this schema: ${error.message ?? error}`);
    }
    this.#cache.set(key, compiled);
    if (this.#cache.size > CACHED_GRAMMARS) {
      const [oldest, evicted] = this.#cache.entries().next().value;
      this.#cache.delete(oldest);
      evicted.dispose();
    }
    return compiled;
  }
}
