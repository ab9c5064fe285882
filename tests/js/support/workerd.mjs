// workerd through miniflare for the edge tests: a bundle made by bundleEdgeWorker, with an R2
// bucket MODEL seeded with model files.
import fs from "node:fs";
import {createRequire} from "node:module";
import path from "node:path";

import {root} from "./models.mjs";

// The test's own dependencies live with the package's.
const {Miniflare} = createRequire(path.join(root, "js-glue", "package.json"))("miniflare");

/**
 * workerd running a bundle (dir/worker.js + the wasm modules beside it), with an R2 bucket MODEL
 * holding `objects` ({key: file}); disposed when the test ends.
 * @example const mf = await startWorkerd(t, dir, {bindings: {MODEL_KEY: "tiny.gguf"}, objects: {"tiny.gguf": tiny()}});
 */
export async function startWorkerd(t, dir, {bindings = {}, objects = {}} = {}) {
  const mf = new Miniflare({
    modules: true, modulesRoot: dir, scriptPath: path.join(dir, "worker.js"),
    modulesRules: [{type: "CompiledWasm", include: ["**/*.wasm"]}],
    r2Buckets: ["MODEL"], bindings, compatibilityDate: "2025-01-01",
  });
  t.after(() => mf.dispose());
  const bucket = await mf.getR2Bucket("MODEL");
  for (const [key, file] of Object.entries(objects)) await bucket.put(key, fs.readFileSync(file));
  return mf;
}
