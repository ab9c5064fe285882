// The grammar constraint on the real Gemma vocabulary (js-glue/src/tokens/grammar/): the mask
// allows exactly the tokens the grammar accepts, text is accepted or refused as JSON says, a
// draft is cut at its first bad token, and schemas the engine cannot take are refused by keyword
// before they reach it.
import assert from "node:assert/strict";
import {before, describe, test} from "node:test";

import {readModelTokenizer} from "../../../../js-glue/src/gguf/model_header.js";
import {stopIds} from "../../../../js-glue/src/tokens/chat.js";
import {GrammarEngine} from "../../../../js-glue/src/tokens/grammar/engine.js";
import {loadXGrammar} from "../../../../js-glue/src/tokens/grammar/load_node.js";
import {checkSchema, MAX_SCHEMA_DEPTH, SchemaError} from "../../../../js-glue/src/tokens/grammar/schema_check.js";
import {gemmaVocab} from "../../support/gateway_fixture.mjs";

let tokenizer;
let engine;
const ids = (text) => tokenizer.encode(text, {addBos: false});
const allowedAfterMask = async (constraint) => {
  const row = new Float32Array(tokenizer.nVocab);
  await constraint.mask(row);
  const allowed = [];
  row.forEach((x, id) => {
    if (x === 0) allowed.push(id);
  });
  return allowed;
};

describe("grammar constraint", () => {
  before(async () => {
    ({tokenizer} = await readModelTokenizer(gemmaVocab()));
    engine = new GrammarEngine(loadXGrammar, tokenizer, stopIds(tokenizer));
  });

  test("json_object accepts an object token by token, then only the end of the turn", async () => {
    const c = await engine.constraint({type: "json_object"});
    for (const id of ids('{"a": [1, "x"], "b": {}}')) assert.ok(await c.accept(id), `token ${id} (${tokenizer.piece(id)}) refused`);
    assert.deepEqual(new Set(await allowedAfterMask(c)), stopIds(tokenizer));
    c.close();
    const array = await engine.constraint({type: "json_object"});
    assert.equal(await array.accept(ids("[")[0]), false, "an array is not an object");
    array.close();
  });

  test("the mask allows exactly the tokens the grammar accepts", async () => {
    const c = await engine.constraint({type: "json_schema", schema: {type: "object", properties: {k: {enum: ["yes", "no"]}}, required: ["k"]}, strict: true});
    for (const id of ids('{"k": ')) assert.ok(await c.accept(id));
    const allowed = await allowedAfterMask(c);
    assert.ok(allowed.length > 0 && allowed.length < 50, `${allowed.length} tokens allowed where a "yes" or "no" must start`);
    for (const id of allowed) assert.equal(await c.validPrefix([id]), 1, `masked in but refused: ${tokenizer.piece(id)}`);
    const allowedSet = new Set(allowed);
    for (let id = 0; id < tokenizer.nVocab; id += 997) if (!allowedSet.has(id)) assert.equal(await c.validPrefix([id]), 0, `masked out but accepted: ${tokenizer.piece(id)}`);
    assert.ok(allowed.map((id) => tokenizer.piece(id)).every((p) => /^(["]|<0x22>)(y|ye|yes|n|no)?$/.test(p)), allowed.map((id) => tokenizer.piece(id)).join(" "));
    c.close();
  });

  test("a draft is cut at its first token the grammar refuses, the state left as it was", async () => {
    const c = await engine.constraint({type: "json_schema", schema: {type: "object", properties: {n: {type: "integer"}}, required: ["n"]}, strict: true});
    const good = ids('{"n": 12');
    const draft = [...good, ids("x")[0], ...ids("}")];
    assert.equal(await c.validPrefix(draft), good.length);
    assert.equal(await c.validPrefix(ids("[")), 0);
    for (const id of ids('{"n": 3}')) assert.ok(await c.accept(id), "the state moved while drafts were checked");
    c.close();
  });

  test("schemas are refused by keyword before the engine sees them", () => {
    const keyword = (schema) => {
      try {
        checkSchema(schema);
        return null;
      } catch (error) {
        assert.ok(error instanceof SchemaError);
        return [error.keyword, error.code];
      }
    };
    assert.equal(keyword({type: "object", properties: {a: {type: ["string", "null"], maxLength: 3}}, required: ["a"], $defs: {x: true}}), null);
    assert.deepEqual(keyword({if: {}}), ["if", "unsupported_schema"]);
    assert.deepEqual(keyword({properties: {a: {items: {pattern: "a+"}}}}), ["pattern", "unsupported_schema"]);
    assert.deepEqual(keyword({type: "object", required: "a"}), ["required", "invalid_schema"]);
    assert.deepEqual(keyword({minLength: -1}), ["minLength", "invalid_schema"]);
    assert.deepEqual(keyword({$ref: "#/definitions/a"}), ["$ref", "invalid_schema"]);
    assert.deepEqual(keyword({$ref: "https://example.com/s.json"}), ["$ref", "invalid_schema"]);
    let deep = {type: "string"};
    for (let i = 0; i <= MAX_SCHEMA_DEPTH; i++) deep = {type: "array", items: deep};
    assert.equal(keyword(deep)[1], "schema_too_large");
  });
});
