// docs/edge.md's sizes of the edge bundle stay true: the worker is bundled as scripts/build-edge
// bundles it, and each file's size and gzipped size (zlib at level 9, close to the doc's
// gzip -9) must be within 10% of the figure the doc gives, as must their gzipped total.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {after, test} from "node:test";
import zlib from "node:zlib";

import {bundleEdgeWorker} from "../../../js-glue/edge/bundle.js";
import {root} from "../support/models.mjs";

const TOLERANCE = 0.1;
const FILES = ["layerfold_wasi.wasm", "layerfold_wasi_relaxed.wasm", "worker.js"];

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lf-edge-sizes-"));
after(() => fs.rmSync(dir, {recursive: true, force: true}));

const number = (text) => Number(text.replaceAll(",", ""));

// The "Module size" paragraph's "`NAME` (…) N bytes, M gzipped" for each file, and "Together T
// bytes gzipped".
function documented(text) {
  const start = text.indexOf("**Module size.**");
  assert.ok(start >= 0, "docs/edge.md has no **Module size.** paragraph");
  const doc = text.slice(start, text.indexOf("\n**", start + 1));
  const sizes = Object.fromEntries(FILES.map((name) => {
    const m = new RegExp(`\`${name.replaceAll(".", "\\.")}\`[^;]*?([\\d,]+) bytes,\\s+([\\d,]+)\\s+gzipped`).exec(doc);
    assert.ok(m, `docs/edge.md gives no "N bytes, M gzipped" for ${name}`);
    return [name, {bytes: number(m[1]), gzipped: number(m[2])}];
  }));
  const together = /Together\s+([\d,]+)\s+bytes\s+gzipped/.exec(doc);
  assert.ok(together, "docs/edge.md gives no gzipped total");
  return {sizes, together: number(together[1])};
}

test("docs/edge.md's bundle sizes are the built bundle's, within 10%", async () => {
  const doc = documented(fs.readFileSync(path.join(root, "docs", "edge.md"), "utf8"));
  await bundleEdgeWorker(dir);
  const off = [];
  const near = (what, documentedSize, actual) => {
    if (Math.abs(actual - documentedSize) > TOLERANCE * actual) off.push(`${what}: the doc says ${documentedSize}, the build gives ${actual}`);
  };
  let total = 0;
  for (const name of FILES) {
    const bytes = fs.readFileSync(path.join(dir, name));
    const gzipped = zlib.gzipSync(bytes, {level: 9}).length;
    total += gzipped;
    near(name, doc.sizes[name].bytes, bytes.length);
    near(`${name} gzipped`, doc.sizes[name].gzipped, gzipped);
  }
  near("together, gzipped", doc.together, total);
  assert.deepEqual(off, []);
});
