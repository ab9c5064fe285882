// The npm package as it ships: `npm pack` in js-glue, the tarball installed into an empty folder
// with no checkout above it, and what a user runs there: `npx layerfold --help`, `validate` on
// the built-in default model (which the installed package generates itself), `inspect` of that
// model, the edge entry with the wasm module it needs, imported through the exports map, `pull`
// of an hf:// file from a hub-like server, and `chat` in a terminal and through the library on that file.
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import {createRequire} from "node:module";
import os from "node:os";
import path from "node:path";
import {after, before, describe, test} from "node:test";

import {Pipeline} from "../../../js-glue/src/index.js";
import {greedy, handChatPrompt} from "../support/gateway_fixture.mjs";
import {startHub} from "../support/hub_server.mjs";
import {model, root} from "../support/models.mjs";
import {runAsync} from "../support/run_async.mjs";

const work = fs.mkdtempSync(path.join(os.tmpdir(), "lf-package-"));
const app = path.join(work, "app");
const cache = path.join(work, "cache");
const defaultModel = path.join(cache, "default-gemma-vocab.gguf");
// This node first on PATH, for npm and for the package's bin; no NODE_PATH that could find
// modules outside the install.
const env = {...process.env, PATH: `${path.dirname(process.execPath)}:${process.env.PATH}`, LAYERFOLD_CACHE_DIR: cache, npm_config_yes: "false"};
delete env.NODE_PATH;

function run(command, args, cwd = app) {
  const r = spawnSync(command, args, {cwd, env, encoding: "utf8", timeout: 300_000});
  return {status: r.status, stdout: r.stdout, stderr: r.stderr};
}

// As a user types it; npm_config_yes=false: the installed bin or nothing, never a download.
const layerfold = (...args) => run("npx", ["layerfold", ...args]);
const sha256 = (file) => crypto.createHash("sha256").update(fs.readFileSync(file)).digest("hex");

let packed;  // npm pack's report: {filename, files: [{path}]}

before(() => {
  const pack = run("npm", ["pack", "--json", "--pack-destination", work], path.join(root, "js-glue"));
  assert.equal(pack.status, 0, pack.stderr);
  [packed] = JSON.parse(pack.stdout);
  fs.mkdirSync(app);
  // The dependencies are in npm's cache once scripts/setup has run: no registry round trips.
  const install = run("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", path.join(work, packed.filename)]);
  assert.equal(install.status, 0, install.stderr);
});

after(() => fs.rmSync(work, {recursive: true, force: true}));

describe("the packed package, installed on its own", () => {
  test("the tarball holds the runtime, the generator, the vocabulary, the edge entry and its example configuration, a README and the license, not the build tools", () => {
    const files = new Set(packed.files.map((f) => f.path));
    for (const file of ["bin/layerfold.js", "src/index.js", "dist/layerfold_mt.wasm", "dist/layerfold_wasi.wasm",
      "dist/make_model.js", "dist/make_model.wasm", "dist/gemma_tokenizer.json.gz", "edge/edge_node.js", "edge/worker.js",
      "edge/wrangler.toml", "README.md", "LICENSE"]) {
      assert.ok(files.has(file), `${file} is not in the tarball`);
    }
    assert.ok(!files.has("edge/bundle.js"), "the bundler script (a devDependency's user) ships");
    assert.ok(![...files].some((f) => f.startsWith("node_modules/")));
  });

  test("the example wrangler.toml, its main pointed at the installed worker as the README says, bundles as wrangler would", async () => {
    const installed = path.join(app, "node_modules", "layerfold");
    const toml = fs.readFileSync(path.join(installed, "edge", "wrangler.toml"), "utf8");
    const main = /main = "(node_modules\/layerfold\/[^"]+)"/.exec(fs.readFileSync(path.join(installed, "README.md"), "utf8"));
    assert.ok(main, "the README says where main points");
    for (const line of [/^binding = "MODEL"$/m, /^type = "CompiledWasm"$/m, /^globs = \["\*\*\/\*\.wasm"\]$/m, /^MODEL_KEY = /m, /^LAYERS = /m]) {
      assert.match(toml, line);
    }
    const worker = path.join(app, main[1]);
    // wrangler bundles with esbuild for workerd, its CompiledWasm rule leaving .wasm imports to the runtime.
    const {build} = createRequire(path.join(root, "js-glue", "package.json"))("esbuild");
    const out = await build({entryPoints: [worker], bundle: true, write: false, format: "esm", platform: "browser",
      conditions: ["workerd", "worker", "browser"], external: ["*.wasm"], logLevel: "silent"});
    assert.equal(out.errors.length, 0);
    const wasmImports = [...out.outputFiles[0].text.matchAll(/from "([^"]+\.wasm)"/g)].map((m) => path.resolve(path.dirname(worker), m[1]));
    assert.ok(wasmImports.length > 0, "the worker imports its module");
    for (const file of wasmImports) assert.ok(fs.existsSync(file), `${file}: imported by the worker, not in the package`);
  });

  test("npx layerfold --help and COMMAND --help print usage and exit 0", () => {
    const all = layerfold("--help");
    assert.equal(all.status, 0, all.stderr);
    assert.match(all.stdout, /layerfold validate \[options\]/);
    assert.match(all.stdout, /layerfold serve --model URL/);
    const one = layerfold("inspect", "--help");
    assert.equal(one.status, 0, one.stderr);
    assert.match(one.stdout, /^usage:\n {2}layerfold inspect MODEL \[options\]\n[^]*--json/);
    assert.doesNotMatch(one.stdout, /layerfold validate/);
  });

  test("npx layerfold validate generates the default model from the package and runs it", () => {
    const r = layerfold("validate", "--json");
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout);
    assert.equal(out.model, defaultModel);
    assert.equal(out.synthetic, true);
    assert.deepEqual(out.tokens, [2, 818, 5279, 529, 7001, 563]);
    assert.equal(out.top.length, 5);
    assert.ok(out.top.every((t) => t.probability > 0 && t.probability < 1));
    // node-llama-cpp is a devDependency: the installed package has no reference to compare with.
    assert.equal(out.llamaCpp, null);
    // The package's generator makes, bit for bit, what the native tool makes from the full tokenizer.json.
    assert.equal(sha256(defaultModel), sha256(model("gemma-vocab", "gemma-vocab")));
    assert.deepEqual(fs.readdirSync(cache), ["default-gemma-vocab.gguf"], "temporary files left in the cache");
  });

  test("npx layerfold make-model makes what scripts/make-model makes, from the package alone", () => {
    const out = path.join(app, "tiny.gguf");
    const r = layerfold("make-model", "--preset", "tiny", "--out", out);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(sha256(out), sha256(model("tiny-package", "tiny")));
  });

  test("npx layerfold inspect describes the default model", () => {
    const r = layerfold("inspect", defaultModel);
    assert.equal(r.status, 0, r.stderr);
    const [first, second] = r.stdout.split("\n");
    assert.match(first, new RegExp(`^${defaultModel.replaceAll(".", "\\.")}: gemma4 "layerfold synthetic gemma4", [\\d.]+ MiB, 2 layers$`));
    assert.match(second, /^ {2}n_embd \d+, n_vocab 262144, n_ctx_train \d+, n_swa \d+$/);
    assert.match(r.stdout, /^ {2}layer {2}0 {2}sliding {2}\d+ heads, .* [\d.]+ MiB {2}\d+ \w+/m);
  });

  test("the edge entry and its wasm module import from the package as documented, and give validate's top-k", () => {
    const script = path.join(app, "edge_check.mjs");
    fs.writeFileSync(script, `
      import fs from "node:fs";
      import {openEdgeNode} from "layerfold/edge";
      const wasm = await WebAssembly.compile(fs.readFileSync(new URL(import.meta.resolve("layerfold/dist/layerfold_wasi.wasm"))));
      import.meta.resolve("layerfold/edge/worker");
      const file = fs.readFileSync(process.argv[2]);
      const bucket = {  // an R2 binding over the local file
        head: async () => ({size: file.length, etag: "e"}),
        get: async (key, {range}) => ({etag: "e", arrayBuffer: async () => file.slice(range.offset, range.offset + range.length)}),
      };
      const node = await openEdgeNode({module: wasm, bucket, key: "default.gguf", memoryBudgetBytes: 2 ** 30});
      const hidden = await node.forward({session: "s", startPos: 0, hidden: node.embed(JSON.parse(process.argv[3])), lastOnly: true});
      const logits = node.logits(hidden);
      const top = [...logits.keys()].sort((a, b) => logits[b] - logits[a]).slice(0, 5);
      console.log(JSON.stringify({build: node.info().build, top}));
      node.close();
    `);
    const validate = JSON.parse(layerfold("validate", "--json").stdout);
    const r = run(process.execPath, [script, defaultModel, JSON.stringify(validate.tokens)]);
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout);
    assert.equal(out.build, "single");
    assert.deepEqual(out.top, validate.top.map((t) => t.id));
  });

  test("npx layerfold pull fetches an hf:// file from a hub-like server (HF_ENDPOINT, HF_TOKEN) into the cache", async () => {
    const hub = await startHub({token: "hf_packagetoken"});
    try {
      const file = model("tiny", "tiny", ["--type", "Q4_0"]);
      hub.publish("me/tiny/tiny.gguf", fs.readFileSync(file));
      // Asynchronously: the hub answers from this process.
      const r = await runAsync("npx", ["layerfold", "pull", "hf://me/tiny/tiny.gguf", "--json"],
        {cwd: app, env: {...env, HF_ENDPOINT: hub.hub, HF_TOKEN: "hf_packagetoken"}});
      assert.equal(r.status, 0, r.stderr);
      const out = JSON.parse(r.stdout);
      assert.equal(out.sha256, sha256(file));
      assert.equal(out.cache_dir, path.join(cache, "objects"));
    } finally {
      await hub.close();
    }
  });

  test("npx layerfold chat answers typed lines on an hf:// model with the tokens of greedy decoding", async () => {
    const file = model("tiny", "tiny", ["--type", "Q4_0"]);
    const pipeline = await Pipeline.open({model: file, build: "single"});
    const expected = await greedy(pipeline, handChatPrompt(pipeline.tokenizer, [{role: "user", content: "Hi"}]), 6);
    await pipeline.close();
    const hub = await startHub();
    try {
      hub.publish("me/tiny/tiny.gguf", fs.readFileSync(file));
      const r = await runAsync("npx", ["layerfold", "chat", "--model", "hf://me/tiny/tiny.gguf", "--build", "single", "--max-tokens", "6"],
        {cwd: app, env: {...env, HF_ENDPOINT: hub.hub}, input: "Hi\n"});
      assert.equal(r.status, 0, r.stderr);
      assert.ok(r.stdout.includes(`${expected.text}\n`), `the reply ${JSON.stringify(expected.text)} is not in ${JSON.stringify(r.stdout)}`);
    } finally {
      await hub.close();
    }
  });

  test("the library's chat streams an answer from an hf:// model, the tokens of greedy decoding", async () => {
    const file = model("tiny", "tiny", ["--type", "Q4_0"]);
    const messages = [{role: "user", content: "The capital of France is"}];
    const pipeline = await Pipeline.open({model: file, build: "single"});
    const expected = await greedy(pipeline, handChatPrompt(pipeline.tokenizer, messages), 6);
    await pipeline.close();
    const script = path.join(app, "chat_check.mjs");
    fs.writeFileSync(script, `
      import {openModel} from "layerfold";
      const model = await openModel({model: "hf://me/tiny/tiny.gguf", build: "single"});
      let text = "";
      for await (const chunk of model.chat(${JSON.stringify(messages)}, {stream: true, max_tokens: 6, temperature: 0})) {
        text += chunk.choices[0]?.delta.content ?? "";
      }
      await model.close();
      console.log(JSON.stringify({text}));
    `);
    const hub = await startHub();
    try {
      hub.publish("me/tiny/tiny.gguf", fs.readFileSync(file));
      const r = await runAsync(process.execPath, [script], {cwd: app, env: {...env, HF_ENDPOINT: hub.hub}});
      assert.equal(r.status, 0, r.stderr);
      assert.equal(JSON.parse(r.stdout).text, expected.text);
    } finally {
      await hub.close();
    }
  });
});
