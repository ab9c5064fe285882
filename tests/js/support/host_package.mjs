// A package the JS host depends on (js-glue/package.json), imported from a test outside js-glue,
// whose own resolution cannot see js-glue/node_modules: by the entry its package.json exports.
import fs from "node:fs";
import path from "node:path";
import {pathToFileURL} from "node:url";

import {root} from "./models.mjs";

/**
 * The ES module `name` of js-glue's dependencies.
 * @example const {encode} = await importHostPackage("fast-png");
 */
export async function importHostPackage(name) {
  const dir = path.join(root, "js-glue", "node_modules", name);
  const pkg = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8"));
  const dot = typeof pkg.exports === "string" ? pkg.exports : pkg.exports?.["."];
  const entry = typeof dot === "string" ? dot : dot?.import?.default ?? dot?.import ?? dot?.default ?? pkg.module ?? pkg.main ?? "index.js";
  return import(pathToFileURL(path.join(dir, entry)).href);
}
