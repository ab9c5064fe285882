// `layerfold validate` / `inspect` / `plan` as a user runs them: exit status, output, one-line errors.
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import {describe, test} from "node:test";

import * as llama from "../support/llama_oracle.mjs";
import {readModelHeader} from "../../../js-glue/src/gguf/model_header.js";
import {model, presetHeader, root} from "../support/models.mjs";
import {runAsync} from "../support/run_async.mjs";

const cli = path.join(root, "js-glue", "bin", "layerfold.js");

function run(...args) {
  const r = spawnSync(process.execPath, [cli, ...args], {encoding: "utf8", timeout: 300_000});
  return {status: r.status, stdout: r.stdout, stderr: r.stderr};
}

describe("layerfold --help", () => {
  test("--help prints every command's usage on stdout and exits 0; no command is exit 2", () => {
    const r = run("--help");
    assert.equal(r.status, 0, r.stderr);
    for (const command of ["validate", "generate", "chat", "calibrate-exit", "inspect", "plan", "pull", "serve"]) {
      assert.match(r.stdout, new RegExp(`^  layerfold ${command} `, "m"));
    }
    const none = run();
    assert.equal(none.status, 2);
    assert.match(none.stderr, /^usage:/);
  });

  for (const command of ["validate", "generate", "chat", "calibrate-exit", "inspect", "plan", "pull", "serve"]) {
    test(`${command} --help (and -h) prints its usage only and exits 0`, () => {
      for (const flag of ["--help", "-h"]) {
        const r = run(command, flag);
        assert.equal(r.status, 0, r.stderr);
        assert.match(r.stdout, new RegExp(`^usage:\n  layerfold ${command} `));
        assert.equal((r.stdout.match(/^  layerfold /gm) ?? []).length, 1, r.stdout);
      }
    });
  }
});

describe("layerfold validate", () => {
  const file = model("gemma-vocab", "gemma-vocab");

  test("tokenizes with the Gemma vocabulary, runs a two-node pipeline, agrees with llama.cpp", () => {
    const r = run("validate", "--model", file, "--nodes", "local:0-0,local:1-1", "--json");
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout);
    assert.deepEqual(out.tokens, [2, 818, 5279, 529, 7001, 563]);
    assert.equal(out.synthetic, true);
    assert.equal(out.top.length, 5);
    assert.deepEqual(out.timings.nodes.map((n) => n.layers), [[0, 1], [1, 2]]);
    assert.ok(out.timings.nodes.every((n) => n.layerMs.length === 1 && n.layerMs[0] >= 0));
    assert.equal(out.llamaCpp.sameTop1, true);
    assert.ok(out.llamaCpp.maxLogProbDiff < 0.01);
  });

  test("a pipeline of nodes gives the same distribution as one node, bit for bit", () => {
    const one = JSON.parse(run("validate", "--model", file, "--json", "--top-k", "20").stdout);
    const two = JSON.parse(run("validate", "--model", file, "--nodes", "local:0-0,local:1-1", "--json", "--top-k", "20").stdout);
    assert.deepEqual(two.top, one.top);
  });

  test("--json into a pipe whose reader is slow: the whole answer arrives, not the first 64 KiB", () => {
    // file:// so that no llama.cpp comparison runs; the reader starts only after the CLI is done.
    const r = spawnSync("bash", ["-c", `"${process.execPath}" "${cli}" validate --model "file://${file}" --top-k 3000 --json | (sleep 1; cat)`],
      {encoding: "utf8", timeout: 120_000, maxBuffer: 16 * 1024 * 1024});
    assert.equal(r.status, 0, r.stderr);
    const bytes = Buffer.byteLength(r.stdout);
    assert.doesNotThrow(() => JSON.parse(r.stdout), `the output was cut at ${bytes} bytes`);
    assert.equal(JSON.parse(r.stdout).top.length, 3000);
    assert.ok(bytes > 64 * 1024, `${bytes} bytes fit the pipe's buffer: not a test of it`);
  });

  test("the text report says the weights are synthetic", () => {
    const r = run("validate", "--model", file);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /SYNTHETIC weights/);
    assert.match(r.stdout, /llama\.cpp on the same file: top-1 agrees/);
  });

  for (const [what, args, reason] of [
    ["a gap between nodes", ["--nodes", "local:0-0"], /served by no node|has 2 layers/],
    ["overlapping nodes", ["--nodes", "local:0-1,local:1-1"], /overlap/],
    ["a malformed node", ["--nodes", "remote:0-1"], /bad node/],
    ["a missing model", ["--model", "/nonexistent/model.gguf"], /nonexistent/],
    ["a prompt longer than the context", ["--prompt", "word ".repeat(600)], /context|max_ctx|positions/],
  ]) {
    test(`${what}: exit 2 and a one-line reason`, () => {
      const r = run("validate", ...(args.includes("--model") ? [] : ["--model", file]), ...args);
      assert.equal(r.status, 2, r.stdout + r.stderr);
      assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
      assert.match(r.stderr, reason);
    });
  }
});

describe("layerfold inspect", () => {
  const inspectJson = (file) => {
    const r = run("inspect", file, "--json");
    assert.equal(r.status, 0, r.stderr);
    return JSON.parse(r.stdout);
  };
  // A layer's bytes and "type [ne]" of each tensor, from the header's table.
  const layerOf = (header, names) => ({
    bytes: names.reduce((sum, name) => sum + header.tensors.find((t) => t.name === name).n_bytes, 0),
    tensors: Object.fromEntries(names.map((name) => {
      const t = header.tensors.find((x) => x.name === name);
      return [name, `${t.type} [${t.ne.join(", ")}]`];
    })),
  });

  test("prints the engine's info, and per layer the tensors a node loads with their types and bytes", async () => {
    const file = presetHeader("tiny");
    const out = inspectJson(file);
    const header = await readModelHeader(file);
    assert.deepEqual(out.info, header.info);
    assert.equal(out.info.arch, "gemma4");
    assert.equal(out.layers.length, 2);
    assert.equal(out.layers[0].tensors["blk.0.attn_q.weight"], "Q4_0 [64, 128]");
    assert.equal(out.layers[1].tensors["blk.1.attn_v.weight"], undefined);  // global layer: V = K
    const names = (il) => header.tensors.map((t) => t.name).filter((name) => name.startsWith(`blk.${il}.`));
    assert.deepEqual(out.layers[0], {layer: 0, ...layerOf(header, names(0))});
    // The global layer's node also loads the rope factors its attention uses.
    assert.deepEqual(out.layers[1], {layer: 1, ...layerOf(header, [...names(1), "rope_freqs.weight"])});
    // Tied head: the last node holds token_embd as its head, beside output_norm.
    assert.equal(out.embedding_bytes, layerOf(header, ["token_embd.weight"]).bytes);
    assert.equal(out.head_bytes, layerOf(header, ["token_embd.weight", "output_norm.weight"]).bytes);
    const text = run("inspect", file);
    assert.equal(text.status, 0, text.stderr);
    assert.match(text.stdout, /^ {2}n_embd 64, n_vocab 1024, n_ctx_train \d+, n_swa 4$/m);
    assert.match(text.stdout, /^ {2}layer {2}1 {2}global {3}4 heads, 1 KV head of 64, n_ff 128 +[\d.]+ MiB {2}\d+ F32, \d+ Q4_0$/m);
  });

  test("a shared-KV layer is shown with the layer whose KV cache it reads, and without K/V tensors", () => {
    const file = presetHeader("tiny-shared-kv2");
    const out = inspectJson(file);
    assert.deepEqual(out.info.layers.map((l) => l.kv_layer), [0, 1, 2, 1, 2]);
    assert.deepEqual(Object.keys(out.layers[4].tensors).filter((name) => /attn_[kv]\b/.test(name)), []);
    assert.match(run("inspect", file).stdout, /^ {2}layer {2}4 .*, KV of layer 2 /m);
  });

  test("shows a mixture-of-experts model's experts as the engine reads them, and every expert tensor of a layer", () => {
    const file = presetHeader("moe-tiny");
    const out = inspectJson(file);
    assert.deepEqual([out.info.n_expert, out.info.n_expert_used, out.info.n_ff_exp], [7, 3, 96]);
    assert.ok(out.info.layers.every((l) => l.moe));
    assert.equal(out.layers[0].tensors["blk.0.ffn_gate_up_exps.weight"], "Q4_0 [64, 192, 7]");
    assert.equal(out.layers[0].tensors["blk.0.ffn_down_exps.scale"], "F32 [7]");
    assert.equal(out.layers[0].tensors["blk.0.ffn_gate_inp.scale"], "F32 [64]");
    const text = run("inspect", file);
    assert.equal(text.status, 0, text.stderr);
    assert.match(text.stdout, /mixture of experts: 7 experts of width 96, 3 used per token/);
    assert.match(text.stdout, /layer {2}0 {2}sliding {2}4 heads, 2 KV heads of 32, n_ff 128 and experts /);
  });
});

describe("layerfold generate", () => {
  const file = model("gemma-vocab", "gemma-vocab");
  const lastJson = (stdout) => JSON.parse(stdout.trim().split("\n").at(-1));

  test("greedy continuation equals llama.cpp's on the same file, through two nodes", async () => {
    const r = run("generate", "--model", file, "--nodes", "local:0-0,local:1-1", "--max-tokens", "8", "--json");
    assert.equal(r.status, 0, r.stderr);
    const ours = lastJson(r.stdout);
    const handle = await llama.loadLlama(file, {contextSize: 64});
    try {
      const prompt = await llama.tokenize(handle, "The capital of France is", {addBos: true});
      assert.deepEqual(ours.tokens, await llama.greedy(handle, prompt, 8));
    } finally {
      await llama.close(handle);
    }
  });

  test("sampling is reproducible from the seed", () => {
    const sample = (seed) => lastJson(run("generate", "--model", file, "--max-tokens", "6", "--temperature", "1.5",
      "--top-k", "1000", "--top-p", "1", "--seed", seed, "--json").stdout).tokens;
    const a = sample("3");
    assert.deepEqual(sample("3"), a);
    assert.notDeepEqual(sample("4"), a);
  });

  test("one prompt: the text, then its timings in the text report and in --json, consistent with its counts", () => {
    const r = run("generate", "--model", file, "--max-tokens", "5");
    assert.equal(r.status, 0, r.stderr);
    const m = /\n {2}prompt {4}(\d+) tokens in ([\d.]+) ms \(([\d.]+) ms per token, ([\d.]+) tokens per second\)\n {2}predicted (\d+) tokens in ([\d.]+) ms/.exec(r.stdout);
    assert.ok(m, r.stdout);
    assert.equal(Number(m[1]), 6, "the default prompt's tokens");
    assert.ok(Math.abs(Number(m[3]) - Number(m[2]) / 6) < 0.01 + 1e-9);
    assert.match(r.stderr, /^note: layerfold synthetic /);
    const json = lastJson(run("generate", "--model", file, "--max-tokens", "5", "--json").stdout);
    const t = json.timings;
    assert.equal(t.prompt_n, 6);
    assert.equal(t.predicted_n, json.tokenMs.length);
    assert.ok(t.predicted_n > 1 && t.predicted_ms > 0);
    assert.ok(Math.abs(t.predicted_per_token_ms - t.predicted_ms / (t.predicted_n - 1)) < 1e-9);
    assert.ok(Math.abs(t.predicted_per_second - (1000 * (t.predicted_n - 1)) / t.predicted_ms) < 1e-6);
    assert.equal(json.synthetic, true);
  });

  test("--chat renders the model's template and generates", () => {
    const r = run("generate", "--model", file, "--chat", "--max-tokens", "4", "--json");
    assert.equal(r.status, 0, r.stderr);
    assert.ok(lastJson(r.stdout).tokens.length > 0);
  });

  test("several prompts generate at once, each the continuation of a run of its own, printed in order with timings", () => {
    const prompts = ["The capital of France is", "Once upon a time", "Hello"];
    const sampling = ["--nodes", "local:0-0,local:1-1", "--max-tokens", "6", "--temperature", "1.5", "--top-k", "1000", "--top-p", "1", "--seed", "3"];
    const alone = prompts.map((prompt) => {
      const r = run("generate", "--model", file, "--prompt", prompt, ...sampling, "--json");
      assert.equal(r.status, 0, r.stderr);
      return lastJson(r.stdout);
    });
    const r = run("generate", "--model", file, ...prompts.flatMap((prompt) => ["--prompt", prompt]), ...sampling, "--json");
    assert.equal(r.status, 0, r.stderr);
    const lines = r.stdout.trim().split("\n").map((line) => JSON.parse(line));
    assert.equal(lines.length, prompts.length + 1);
    const sameRun = ({prompt, tokens, text}) => ({prompt, tokens, text});
    prompts.forEach((prompt, i) => {
      assert.deepEqual(sameRun(lines[i]), sameRun(alone[i]), `prompt ${i + 1}`);
      assert.equal(lines[i].prompt, prompt);
      const steps = alone[i].tokens.length + (alone[i].tokens.length < 6 ? 1 : 0);
      assert.equal(lines[i].tokenMs.length, steps);
      assert.ok(lines[i].tokenMs.every((ms) => ms > 0));
      // llama.cpp's timings: every step's sampled token predicted, the end of turn included.
      assert.equal(lines[i].timings.predicted_n, steps);
      assert.equal(lines[i].timings.cache_n, 0);
      assert.ok(lines[i].timings.prompt_n > 0 && lines[i].timings.prompt_ms >= lines[i].tokenMs[0]);
      assert.equal(lines[i].synthetic, true);
    });
    const total = lines.at(-1);
    assert.equal(total.prompts, 3);
    assert.equal(total.tokens, alone.reduce((n, a) => n + a.tokens.length, 0));
    assert.ok(total.tokensPerSecond > 0 && Math.abs(total.tokensPerSecond - total.tokens / total.seconds) < 1e-6);

    // The text report, from a file of prompts: each block in prompt order, then the aggregate.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lf-prompts-"));
    try {
      fs.writeFileSync(path.join(dir, "prompts.txt"), `${prompts.join("\n")}\n\n`);
      const text = run("generate", "--model", file, "--prompt-file", path.join(dir, "prompts.txt"), ...sampling);
      assert.equal(text.status, 0, text.stderr);
      const expected = prompts.map((prompt, i) => `[${i + 1}/3] ${prompt}\n${alone[i].text}\n  prompt    ${alone[i].timings.prompt_n} tokens in `);
      let at = 0;
      for (const block of expected) {
        const found = text.stdout.indexOf(block, at);
        assert.ok(found >= at, `${JSON.stringify(block)} not in order in:\n${text.stdout}`);
        at = found + block.length;
      }
      assert.equal(text.stdout.match(/^ {2}predicted \d+ tokens in \d+\.\d ms \(\d+\.\d\d ms per token, \d+\.\d tokens per second\)$/gm)?.length, 3);
      assert.match(text.stderr, /^note: layerfold synthetic \w+: make-model made this model/);
      assert.match(text.stdout.trim().split("\n").at(-1), /^3 prompts, \d+ tokens in \d+\.\d\d s: \d+\.\d tokens\/s$/);
      const missing = run("generate", "--model", file, "--prompt-file", path.join(dir, "none.txt"));
      assert.equal(missing.status, 2);
      assert.match(missing.stderr, /^layerfold generate: --prompt-file .*none\.txt: no such file\n$/);
    } finally {
      fs.rmSync(dir, {recursive: true, force: true});
    }
  });
});

describe("layerfold plan", () => {
  test("balanced contiguous ranges covering every layer", () => {
    const r = run("plan", model("small-q8", "small", ["--type", "Q8_0"]), "--nodes", "3", "--json");
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout);
    assert.deepEqual(out.nodes.map((n) => n.layers), [[0, 1], [2, 3], [4, 5]]);
    assert.equal(out.spec, "local:0-1,local:2-3,local:4-5");
  });

  test("a budget too small for any split fails with a reason", () => {
    const r = run("plan", model("small-q8", "small", ["--type", "Q8_0"]), "--nodes", "2", "--memory", "1000");
    assert.equal(r.status, 1);
    assert.match(r.stderr, /need more than/);
  });
});

// A real HTTP server with Range support on loopback, serving one file with its ETag.
async function serveFile(file) {
  const bytes = fs.readFileSync(file);
  const server = http.createServer((req, res) => {
    const m = /bytes=(\d+)-(\d+)/.exec(req.headers.range ?? "");
    if (!m) {
      res.writeHead(200, {"content-length": bytes.length, "accept-ranges": "bytes", etag: '"v1"'});
      return res.end(req.method === "HEAD" ? undefined : bytes);
    }
    const [a, b] = [Number(m[1]), Math.min(Number(m[2]), bytes.length - 1)];
    res.writeHead(206, {"content-length": b - a + 1, "content-range": `bytes ${a}-${b}/${bytes.length}`, etag: '"v1"'});
    res.end(bytes.subarray(a, b + 1));
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {url: `http://127.0.0.1:${server.address().port}/${path.basename(file)}`, close: () => server.close()};
}

describe("a model by URL", () => {
  test("validate over HTTP equals the local run, fills the cache, and shows a progress bar on a terminal", async () => {
    const file = model("tiny", "tiny", ["--type", "Q4_0"]);
    const server = await serveFile(file);
    const cache = fs.mkdtempSync(path.join(os.tmpdir(), "lf-cli-cache-"));
    try {
      const local = JSON.parse(run("validate", "--model", file, "--json", "--top-k", "10").stdout);
      const remote = await runAsync(process.execPath, [cli, "validate", "--model", server.url, "--cache-dir", cache, "--json", "--top-k", "10"]);
      assert.equal(remote.status, 0, remote.stderr);
      assert.deepEqual(JSON.parse(remote.stdout).top, local.top);
      assert.ok(fs.readdirSync(cache, {recursive: true}).length > 0, "nothing cached");
      // Under a pseudo-terminal (script(1)) the load shows cli-progress bars on stderr.
      const tty = await runAsync("script", ["-qec", `${process.execPath} ${cli} validate --model ${server.url} --cache-dir ${cache}-tty`, "/dev/null"]);
      assert.equal(tty.status, 0, tty.stdout);
      assert.match(tty.stdout, /node 0 \|.*\| *\d+%/);
    } finally {
      server.close();
      fs.rmSync(cache, {recursive: true, force: true});
      fs.rmSync(`${cache}-tty`, {recursive: true, force: true});
    }
  });
});
