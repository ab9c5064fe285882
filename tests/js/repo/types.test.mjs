// The package's TypeScript declarations: they type-check a realistic use with --strict, reject
// a wrong one, and declare exactly what the package exports at run time.
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import {describe, test} from "node:test";

import * as runtime from "../../../js-glue/src/index.js";
import {root} from "../support/models.mjs";

const tsc = path.join(root, "js-glue", "node_modules", "typescript", "bin", "tsc");
const dir = path.join(root, "tests", "js", "repo", "types");
function typeCheck(file) {
  // -p cannot be combined with file names: write a tsconfig per file beside the shared one.
  const config = path.join(dir, `tsconfig.${file}.json`);
  fs.writeFileSync(config, JSON.stringify({extends: "./tsconfig.json", files: [file]}));
  try {
    return spawnSync(process.execPath, [tsc, "-p", config], {encoding: "utf8"});
  } finally {
    fs.rmSync(config);
  }
}

describe("TypeScript declarations (index.d.ts)", () => {
  test("a realistic use type-checks with --strict", () => {
    const r = typeCheck("usage.ts");
    assert.equal(r.status, 0, r.stdout + r.stderr);
  });

  test("a wrong use is rejected", () => {
    const r = typeCheck("misuse.ts");
    assert.notEqual(r.status, 0);
    assert.match(r.stdout, /misuse\.ts.*error TS2322/s);
  });

  test("every run-time export is declared, and nothing else", () => {
    const declared = [...fs.readFileSync(path.join(root, "js-glue", "index.d.ts"), "utf8")
      .matchAll(/^export (?:class|function) (\w+)/gm)].map((m) => m[1]).sort();
    assert.deepEqual(declared, Object.keys(runtime).sort());
  });
});
