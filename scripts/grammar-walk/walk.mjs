// The walk scripts/bench-grammar times in each runtime (Node, and workerd through worker.mjs):
// per schema, its compile, then tokens sampled at random among the ones the grammar allows, so
// the walk visits strings, numbers, keys and enums as a model's output would; per token the
// mask (XGrammar's bitmask fetched, refused logits set to -Infinity in the row) and the advance
// by the sampled token. `now` is the runtime's clock: workerd's counts whole milliseconds, so
// there only the means are exact (each sample is a difference of two readings of a clock that
// runs on, so its rounding averages out) and the percentiles are whole milliseconds.

// Nested objects, arrays, enums; the same with its strings bounded, which makes the engine check
// many tokens at run time near the bound; and one free string.
const order = (name, sku) => ({
  type: 'object',
  properties: {
    id: { type: 'integer', minimum: 0, maximum: 999 },
    status: { enum: ['open', 'shipped', 'closed'] },
    customer: { type: 'object', properties: { name, vip: { type: 'boolean' } }, required: ['name', 'vip'] },
    items: { type: 'array', items: { type: 'object', properties: { sku, qty: { type: 'integer' } }, required: ['sku', 'qty'] }, maxItems: 4 },
  },
  required: ['id', 'status', 'customer', 'items'],
});
const SCHEMAS = {
  'order (nested, enums, arrays)': order({ type: 'string' }, { enum: ['a1', 'b2', 'c3'] }),
  'order, strings maxLength 24 and 12': order({ type: 'string', maxLength: 24 }, { type: 'string', maxLength: 12 }),
  'one free string': { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
};

const stats = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return { mean: s.reduce((a, b) => a + b, 0) / s.length, p50: s[Math.floor(s.length / 2)], p99: s[Math.min(s.length - 1, Math.floor(s.length * 0.99))] };
};

/**
 * Rows of the walk: the engine's opening with json_object's compile ({what, once}), then per
 * schema {what, once, mask: {mean, p50, p99}, accept: {mean, p50, p99}} in milliseconds.
 * engine: a GrammarEngine (src/tokens/grammar/engine.js) over a vocabulary of nVocab tokens,
 * ends its end-of-generation ids.
 * @example const rows = await grammarWalk({ engine, nVocab: 262144, ends, tokens: 400, now: () => performance.now() });
 */
export async function grammarWalk({ engine, nVocab, ends, tokens, now }) {
  const rows = [];
  let t0 = now();
  (await engine.constraint({ type: 'json_object' })).close();
  rows.push({ what: `engine opened (${nVocab} tokens) + json_object compiled`, once: now() - t0 });
  let seed = 1;
  const random = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
  const row = new Float32Array(nVocab);
  for (const [name, schema] of Object.entries(SCHEMAS)) {
    t0 = now();
    let constraint = await engine.constraint({ type: 'json_schema', schema, strict: true });
    const compileMs = now() - t0;
    const mask = [];
    const accept = [];
    for (let n = 0; n < tokens; n++) {
      for (let i = 0; i < row.length; i++) row[i] = random();
      const t1 = now();
      await constraint.mask(row);
      const t2 = now();
      let id = 0;
      for (let i = 1; i < row.length; i++) if (row[i] > row[id]) id = i;
      if (ends.has(id)) {
        constraint.close();
        constraint = await engine.constraint({ type: 'json_schema', schema, strict: true });
        continue;
      }
      const t3 = now();
      if (!(await constraint.accept(id))) throw new Error(`token ${id} refused after the mask allowed it`);
      accept.push(now() - t3);
      mask.push(t2 - t1);
    }
    constraint.close();
    rows.push({ what: name, once: compileMs, mask: stats(mask), accept: stats(accept) });
  }
  return rows;
}
