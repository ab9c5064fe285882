// The grammar engine on a thread of its own (js-glue/src/generation/grammar_thread.js), as the Node
// gateway runs it: the event loop keeps turning while the engine opens and a schema compiles,
// the thread's constraints mask, accept and check drafts exactly as the engine's own do (a token
// the grammar refuses failing the next call), a refused schema comes back as the SchemaError
// naming its keyword, and after the thread ends its constraints fail while the next constraint
// starts a new thread.
import assert from "node:assert/strict";
import {after, before, describe, test} from "node:test";

import {GrammarThread} from "../../../js-glue/src/generation/grammar_thread.js";
import {readModelTokenizer} from "../../../js-glue/src/gguf/model_header.js";
import {stopIds} from "../../../js-glue/src/tokens/chat.js";
import {GrammarEngine} from "../../../js-glue/src/tokens/grammar/engine.js";
import {loadXGrammar} from "../../../js-glue/src/tokens/grammar/load_node.js";
import {SchemaError} from "../../../js-glue/src/tokens/grammar/schema_check.js";
import {gemmaVocab} from "../support/gateway_fixture.mjs";
import {ORDER_SCHEMA} from "../support/order_schema.mjs";

// Bounded strings: a schema whose compile takes a good part of a second or more.
const BOUNDED = {type: "object", properties: {a: {type: "string", maxLength: 24}, b: {type: "string", maxLength: 12}}, required: ["a", "b"]};
const format = (schema) => ({type: "json_schema", schema, strict: true});

// How many times the event loop turns while `work` runs.
async function turnsDuring(work) {
  let turns = 0;
  let running = true;
  const spin = () => {
    turns++;
    if (running) setImmediate(spin);
  };
  setImmediate(spin);
  try {
    return {value: await work(), turns};
  } finally {
    running = false;
  }
}

describe("grammar thread", () => {
  let header;
  let tokenizer;
  before(async () => {
    ({header, tokenizer} = await readModelTokenizer(gemmaVocab()));
  });
  after(() => tokenizer.close());

  test("the event loop keeps turning while the thread opens the engine and compiles a schema", async (t) => {
    const thread = new GrammarThread(header, tokenizer.nVocab);
    t.after(() => thread.close());
    const inline = new GrammarEngine(loadXGrammar, tokenizer, stopIds(tokenizer));
    const here = await turnsDuring(() => inline.constraint(format(BOUNDED)));
    here.value.close();
    const there = await turnsDuring(() => thread.constraint(format(BOUNDED)));
    there.value.close();
    assert.ok(there.turns > 100 && there.turns > 20 * here.turns, `the loop turned ${there.turns} times with the thread, ${here.turns} times inline`);
  });

  test("masks, accepts and draft checks equal the engine's own, step by step", async (t) => {
    const thread = new GrammarThread(header, tokenizer.nVocab);
    t.after(() => thread.close());
    const inline = new GrammarEngine(loadXGrammar, tokenizer, stopIds(tokenizer));
    const [a, b] = [await thread.constraint(format(ORDER_SCHEMA)), await inline.constraint(format(ORDER_SCHEMA))];
    const text = tokenizer.encode('{"id": 7, "status": "open", "customer": {"name": "Ann", "vip": true}, "items": [{"sku": "a1", "qty": 2}], "note": null}', {addBos: false});
    for (let i = 0; i < text.length; i++) {
      const [rowA, rowB] = [new Float32Array(tokenizer.nVocab), new Float32Array(tokenizer.nVocab)];
      await a.mask(rowA);
      await b.mask(rowB);
      assert.deepEqual(rowA, rowB, `the masks after ${i} tokens`);
      const draft = [...text.slice(i, i + 4), tokenizer.encode("]]", {addBos: false})[0]];
      assert.equal(await a.validPrefix(draft), await b.validPrefix(draft), `the draft after ${i} tokens`);
      assert.equal(await a.accept(text[i]), true);
      assert.equal(await b.accept(text[i]), true);
    }
    // After the object only the turn's end: a refused token fails the thread's next call.
    await a.accept(tokenizer.encode("{", {addBos: false})[0]);
    await assert.rejects(a.mask(new Float32Array(tokenizer.nVocab)), /the grammar refused token/);
    a.close();
    b.close();
    await assert.rejects(a.mask(new Float32Array(3)), /a logits row of 3, expected 262144/);
  });

  test("a schema the engine cannot take: the SchemaError naming its keyword", async (t) => {
    const thread = new GrammarThread(header, tokenizer.nVocab);
    t.after(() => thread.close());
    await assert.rejects(thread.constraint(format({type: "string", pattern: "^a+$"})),
      (error) => error instanceof SchemaError && error.keyword === "pattern" && /"pattern"/.test(error.message));
    const c = await thread.constraint({type: "json_object"});
    c.close();
  });

  test("after the thread ends its constraints fail, and the next constraint starts a new thread", async () => {
    const thread = new GrammarThread(header, tokenizer.nVocab);
    const before = await thread.constraint({type: "json_object"});
    await thread.close();
    await assert.rejects(before.mask(new Float32Array(tokenizer.nVocab)), /the grammar thread exited/);
    const again = await thread.constraint({type: "json_object"});
    const row = new Float32Array(tokenizer.nVocab);
    await again.mask(row);
    assert.ok(row[tokenizer.encode("{", {addBos: false})[0]] === 0 && row[tokenizer.encode("[", {addBos: false})[0]] === -Infinity, "an object may start, an array not");
    await thread.close();
  });
});
