// The model info's one schema (js-glue/src/gguf/model_info.schema.json) against both sides that
// could drift from it: what the engine emits (lf_model_info_json) for every make-model preset,
// every field present with its declared type and none undeclared; and index.d.ts's ModelInfo,
// field by field, which the JSDoc of gguf/header.js names instead of spelling the fields again.
import assert from "node:assert/strict";
import fs from "node:fs";
import {createRequire} from "node:module";
import path from "node:path";
import {describe, test} from "node:test";

import {readModelHeader} from "../../../js-glue/src/gguf/model_header.js";
import {presetHeader, presetNames, root} from "../support/models.mjs";

const require = createRequire(path.join(root, "js-glue", "package.json"));
const Ajv = require("ajv");
const ts = require("typescript");

const glue = path.join(root, "js-glue");
const schema = JSON.parse(fs.readFileSync(path.join(glue, "src", "gguf", "model_info.schema.json"), "utf8"));

// Every object of the schema: the path to it and its definition.
function schemaObjects(node = schema, at = "ModelInfo") {
  if (node.type === "array") return schemaObjects(node.items, `${at}[]`);
  if (node.type !== "object") return [];
  return [[at, node], ...Object.entries(node.properties).flatMap(([name, sub]) => schemaObjects(sub, `${at}.${name}`))];
}

// A JSON Schema node as a comparable shape: "integer" and "number" are both TypeScript's number.
function schemaShape(node) {
  if (node.enum) return {enum: [...node.enum].sort()};
  if (node.type === "integer" || node.type === "number") return "number";
  if (node.type === "array") return {array: schemaShape(node.items)};
  if (node.type === "object") {
    return {object: Object.fromEntries(Object.entries(node.properties).map(([name, sub]) => [name, {required: node.required.includes(name), type: schemaShape(sub)}]))};
  }
  return node.type;
}

// A TypeScript type node of index.d.ts as the same shape; anything else is named, to fail the comparison.
function typeShape(node) {
  switch (node.kind) {
    case ts.SyntaxKind.NumberKeyword: return "number";
    case ts.SyntaxKind.BooleanKeyword: return "boolean";
    case ts.SyntaxKind.StringKeyword: return "string";
    case ts.SyntaxKind.ArrayType: return {array: typeShape(node.elementType)};
    case ts.SyntaxKind.TypeLiteral: return {object: membersShape(node.members)};
    case ts.SyntaxKind.UnionType:
      if (node.types.every((t) => ts.isLiteralTypeNode(t) && ts.isStringLiteral(t.literal))) return {enum: node.types.map((t) => t.literal.text).sort()};
      break;
    case ts.SyntaxKind.TypeReference:
      if (node.typeName.getText() === "Array" && node.typeArguments?.length === 1) return {array: typeShape(node.typeArguments[0])};
      break;
  }
  return `unsupported: ${node.getText()}`;
}

function membersShape(members) {
  return Object.fromEntries(members.map((m) => {
    assert.ok(ts.isPropertySignature(m) && m.type, `ModelInfo member ${m.getText()} is not a plain property`);
    return [m.name.getText(), {required: !m.questionToken, type: typeShape(m.type)}];
  }));
}

function declaredModelInfo() {
  const file = path.join(glue, "index.d.ts");
  const source = ts.createSourceFile(file, fs.readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true);
  const declaration = source.statements.find((s) => ts.isInterfaceDeclaration(s) && s.name.text === "ModelInfo");
  assert.ok(declaration, "index.d.ts declares no interface ModelInfo");
  return {object: membersShape(declaration.members)};
}

describe("the model info's schema", () => {
  test("declares every field of every object as required, and forbids others", () => {
    const objects = schemaObjects();
    assert.deepEqual(objects.map(([at]) => at), ["ModelInfo", "ModelInfo.layers[]"]);
    for (const [at, node] of objects) {
      assert.deepEqual([...node.required].sort(), Object.keys(node.properties).sort(), `${at}: required`);
      assert.equal(node.additionalProperties, false, `${at}: additionalProperties`);
    }
  });

  test("index.d.ts's ModelInfo declares the schema's fields, each with its type, and no other", () => {
    assert.deepEqual(declaredModelInfo(), schemaShape(schema));
  });

  test("gguf/header.js's JSDoc types the info as index.d.ts's ModelInfo, never by fields of its own", () => {
    const header = path.join(glue, "src", "gguf", "header.js");
    const text = fs.readFileSync(header, "utf8");
    const imports = [...text.matchAll(/\{import\('([^']+)'\)\.ModelInfo\}/g)].map((m) => path.resolve(path.dirname(header), m[1]));
    assert.ok(imports.length >= 2, "ModelHeader.info and readModelInfo's result");
    assert.ok(imports.every((file) => file === path.join(glue, "index.d.ts")), imports.join(", "));
    assert.doesNotMatch(text, /n_head_kv|n_ctx_train/, "a field list of its own");
  });

  const validate = new Ajv({allErrors: true, strict: true}).compile(schema);
  for (const preset of presetNames()) {
    test(`what the engine emits for preset ${preset} has every field with its declared type, and no other`, async () => {
      const {info} = await readModelHeader(presetHeader(preset));
      assert.ok(validate(info), JSON.stringify(validate.errors, null, 2));
      assert.equal(info.layers.length, info.n_layer);
    });
  }
});
