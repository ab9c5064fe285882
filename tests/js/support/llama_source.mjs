// Files of the llama.cpp source the oracle runs (node-llama-cpp bundles it as a git bundle):
// the real Gemma 4 vocabulary and chat template are there, models/ggml-vocab-gemma-4.gguf; and
// the headers small programs against the oracle's own libraries are built with. Each is taken
// out of the bundle once, into build/llama-src/.
import {execFileSync} from "node:child_process";
import {createHash} from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import {fileURLToPath} from "node:url";

import {runChecked} from "./run_async.mjs";

// The repository's root, found from this file (models.mjs reads the Gemma 4 vocabulary here).
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "..");

const bundle = path.join(root, "js-glue", "node_modules", "node-llama-cpp", "llama", "gitRelease.bundle");
const dir = path.join(root, "build", "llama-src");

// Where this process writes what it then renames into place: test files run side by side
// (scripts/test), and each must see a file whole or not at all.
const partOf = (out) => `${out}.${process.pid}.part`;

// The bare clone of the bundle, made once.
function repository() {
  const repo = path.join(dir, "repo.git");
  if (fs.existsSync(repo)) return repo;
  fs.mkdirSync(dir, {recursive: true});
  execFileSync("git", ["clone", "--quiet", "--bare", bundle, partOf(repo)]);
  try {
    fs.renameSync(partOf(repo), repo);
  } catch (error) {
    // another process's clone got there first
    if (!fs.existsSync(repo)) throw error;
    fs.rmSync(partOf(repo), {recursive: true, force: true});
  }
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
  fs.writeFileSync(partOf(out), bytes);
  fs.renameSync(partOf(out), out);
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
  const part = partOf(out);
  fs.mkdirSync(part, {recursive: true});
  execFileSync("tar", ["-x", "-C", part], {input: tar});
  moveInto(part, out);
  fs.rmSync(part, {recursive: true, force: true});
  fs.writeFileSync(done, "");
  return out;
}

// Moves every file of folder `from` into folder `to`, each by a rename: a compiler reading `to`
// meanwhile sees each file whole, the one there before or the same bytes from this archive.
function moveInto(from, to) {
  for (const entry of fs.readdirSync(from, {withFileTypes: true})) {
    const source = path.join(from, entry.name), target = path.join(to, entry.name);
    if (entry.isDirectory()) {
      fs.mkdirSync(target, {recursive: true});
      moveInto(source, target);
    } else {
      fs.renameSync(source, target);
    }
  }
}

const bins = path.join(root, "js-glue", "node_modules", "@node-llama-cpp", "linux-x64", "bins", "linux-x64");
/** The directory of the oracle's prebuilt libraries and CPU backends (a program's BACKEND_DIR). */
export const llamaBins = bins;

/**
 * A small C++ program (`source`) built against the oracle's prebuilt libllama-common, libllama
 * and libggml with the headers of the source they were built from, into build/llama-src/bin once
 * per content of the program: the way to ask llama.cpp what node-llama-cpp does not expose.
 * @example const program = await llamaProgram(path.join(here, "llama_chat", "llama_chat.cpp"));
 */
export async function llamaProgram(source) {
  const hash = createHash("sha256").update(fs.readFileSync(source)).update(bins).digest("hex").slice(0, 16);
  return built(path.join(dir, "bin", `${path.basename(source, ".cpp")}-${hash}`), async (part) => {
    const src = llamaSourceTree(["common", "include", "ggml/include", "vendor"]);
    await runChecked("g++", ["-O1", "-std=c++17", source,
      `-I${src}/common`, `-I${src}/include`, `-I${src}/ggml/include`, `-I${src}/vendor`,
      `-L${bins}`, "-l:libllama-common.so", "-l:libllama.v0.4.0.so", "-l:libggml.v0.4.0.so", "-l:libggml-base.so",
      `-Wl,-rpath,${bins}`, "-o", part]);
  });
}

/**
 * A small C++ program (`source`) that needs only llama.cpp's vendored header-only libraries
 * (miniaudio, stb, nlohmann), compiled with them and nothing of the oracle's, into
 * build/llama-src/bin once per content of the program.
 * @example const program = await llamaVendorProgram(path.join(here, "llama_programs", "llama_audio_decode.cpp"));
 */
export async function llamaVendorProgram(source) {
  const hash = createHash("sha256").update(fs.readFileSync(source)).update("vendor").digest("hex").slice(0, 16);
  return built(path.join(dir, "bin", `${path.basename(source, ".cpp")}-${hash}`), async (part) => {
    const src = llamaSourceTree(["vendor"]);
    await runChecked("g++", ["-O1", "-std=c++17", "-w", source, `-I${src}/vendor`, "-lm", "-lpthread", "-o", part]);
  });
}

/**
 * llamaProgram for a program that uses llama.cpp's multimodal library, which node-llama-cpp does
 * not ship: mtmd's clip loader, image and audio preprocessing and graph builders (tools/mtmd) are
 * compiled into the program from the same source, against the oracle's prebuilt libggml. withLlama:
 * the whole of libmtmd (its tokenizer and decode helpers, and the hashing it vendors), against the
 * oracle's libllama too. Built once per content of the program (a couple of minutes: every
 * projector's graph is in clip.cpp's reach).
 * @example const program = await llamaMtmdProgram(path.join(here, "llama_programs", "llama_vision.cpp"));
 */
export async function llamaMtmdProgram(source, {withLlama = false} = {}) {
  const kind = withLlama ? "mtmd+llama" : "mtmd";
  const hash = createHash("sha256").update(fs.readFileSync(source)).update(bins).update(kind).digest("hex").slice(0, 16);
  return built(path.join(dir, "bin", `${path.basename(source, ".cpp")}-${hash}`), async (part) => {
    const src = llamaSourceTree(["tools/mtmd", "include", "ggml/include", "vendor"]);
    const mtmd = path.join(src, "tools", "mtmd");
    const hashes = path.join(src, "vendor", "hash");
    const models = fs.readdirSync(path.join(mtmd, "models")).filter((f) => f.endsWith(".cpp")).map((f) => path.join(mtmd, "models", f));
    const sources = [source, ...["clip.cpp", "mtmd-image.cpp", "mtmd-audio.cpp"].map((f) => path.join(mtmd, f)), ...models];
    const libs = ["-l:libggml.v0.4.0.so", "-l:libggml-base.so"];
    const objects = fs.mkdtempSync(`${part}-objects-`);
    try {
      if (withLlama) {
        sources.push(...["mtmd.cpp", "mtmd-helper.cpp"].map((f) => path.join(mtmd, f)), path.join(hashes, "hash.cpp"));
        // As libmtmd's CMake builds them: sha1.c as C++ (it lives in a namespace), the others as C.
        sources.push("-x", "c++", path.join(hashes, "sha1", "sha1.c"), "-x", "none");
        for (const file of [path.join(hashes, "sha256", "sha256.c"), path.join(hashes, "xxhash", "xxhash.c")]) {
          const object = path.join(objects, `${path.basename(file, ".c")}.o`);
          await runChecked("gcc", ["-O1", "-w", "-c", file, `-I${hashes}`, "-o", object]);
          sources.push(object);
        }
        libs.unshift("-l:libllama.v0.4.0.so");
      }
      await runChecked("g++", ["-O1", "-std=c++17", "-w", ...sources,
        `-I${mtmd}`, `-I${src}/include`, `-I${src}/ggml/include`, `-I${src}/vendor`, `-I${hashes}`,
        `-L${bins}`, ...libs, `-Wl,-rpath,${bins}`, "-lpthread", "-o", part]);
    } finally {
      fs.rmSync(objects, {recursive: true, force: true});
    }
  });
}

// The program `out`, built by build(part) into this process's part of it and renamed into place
// unless it is there already; calls of one process while it builds share the one build.
const building = new Map();
function built(out, build) {
  if (fs.existsSync(out)) return Promise.resolve(out);
  if (!building.has(out)) {
    building.set(out, (async () => {
      fs.mkdirSync(path.dirname(out), {recursive: true});
      await build(partOf(out));
      fs.renameSync(partOf(out), out);
      return out;
    })().finally(() => building.delete(out)));
  }
  return building.get(out);
}
