// Files of the llama.cpp source the oracle runs (node-llama-cpp bundles it as a git bundle):
// the real Gemma 4 vocabulary and chat template are there, models/ggml-vocab-gemma-4.gguf.
// Each file is taken out of the bundle once, into build/llama-src/.
import {execFileSync} from "node:child_process";
import fs from "node:fs";
import path from "node:path";

import {root} from "./models.mjs";

const bundle = path.join(root, "js-glue", "node_modules", "node-llama-cpp", "llama", "gitRelease.bundle");
const dir = path.join(root, "build", "llama-src");

// The bare clone of the bundle, made once.
function repository() {
  const repo = path.join(dir, "repo.git");
  if (!fs.existsSync(repo)) execFileSync("git", ["clone", "--quiet", "--bare", bundle, repo]);
  return repo;
}

/**
 * The path of `file` (relative to llama.cpp's source root), taken out of the bundle if not yet.
 * @example const vocab = llamaSourceFile("models/ggml-vocab-gemma-4.gguf");
 */
export function llamaSourceFile(file) {
  const out = path.join(dir, "files", file);
  if (fs.existsSync(out)) return out;
  const bytes = execFileSync("git", ["--git-dir", repository(), "show", `HEAD:${file}`], {maxBuffer: 1 << 30});
  fs.mkdirSync(path.dirname(out), {recursive: true});
  fs.writeFileSync(`${out}.part`, bytes);
  fs.renameSync(`${out}.part`, out);
  return out;
}

/**
 * A directory holding the folders `dirs` of llama.cpp's source (headers to build against the
 * oracle's libraries), taken out of the bundle once.
 * @example const src = llamaSourceTree(["common", "include", "ggml/include", "vendor"]);
 */
export function llamaSourceTree(dirs) {
  const out = path.join(dir, "tree");
  const done = path.join(out, `.${dirs.join("+").replaceAll("/", "_")}`);
  if (fs.existsSync(done)) return out;
  fs.mkdirSync(out, {recursive: true});
  const tar = execFileSync("git", ["--git-dir", repository(), "archive", "HEAD", ...dirs], {maxBuffer: 1 << 30});
  execFileSync("tar", ["-x", "-C", out], {input: tar});
  fs.writeFileSync(done, "");
  return out;
}
