// The synthetic-model generator against llama.cpp: every preset must load, evaluate to a sane
// next-token distribution and decode greedily; the generator must be deterministic and refuse
// bad arguments clearly.  Run: node --test tests/js/make_model/make_model.test.mjs
import {test, after} from "node:test";
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {fileURLToPath} from "node:url";

import {close, greedy, loadLlama, nextTokenLogProbs, tokenize} from "../support/llama_oracle.mjs";
import {llamaSourceFile} from "../support/llama_source.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const makeModelScript = path.join(root, "scripts", "make-model");
const makeModelBinary = path.join(root, "build", "native", "make_model");
const cacheDir = path.join(root, "build", "models");
const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), "lf-make-model-"));
after(() => fs.rmSync(tmpDir, {recursive: true, force: true}));

const SHORT_PROMPT = "The capital of France is";
// llama.cpp's Gemma 4 vocabulary file, with Google's chat template (an earlier one than its
// models/templates/ copy).
const GEMMA4_VOCAB = () => llamaSourceFile("models/ggml-vocab-gemma-4.gguf");
const GEMMA4_TEMPLATE = () => llamaSourceFile("models/templates/google-gemma-4-31B-it.jinja");
// 19 words and stops: longer than every synthetic preset's sliding window except 31b-shape's.
const LONG_PROMPT = "The capital of France is Paris. The capital of Germany is Berlin. The capital of Italy is";

const PRESETS = [
  {name: "tiny", nVocab: 1024, window: 4},
  {name: "tiny-gemma3", nVocab: 1024, window: 4},
  {name: "small", nVocab: 2048, window: 16},
  {name: "31b-shape", nVocab: 4096, cached: true, contextSize: 64},
  // E2B/E4B: per-layer embeddings, shared-KV layers (which llama.cpp maps only when layer
  // n_kv - 2 slides and n_kv - 1 is global), per-layer FFN widths.
  {name: "e2b-shape", nVocab: 2048, cached: true, contextSize: 64},
  {name: "e4b-shape", nVocab: 2048, cached: true, contextSize: 64},
  {name: "tiny-shared-kv1", nVocab: 1024, window: 4},
  {name: "tiny-shared-kv2", nVocab: 1024, window: 4},
  // Mixture of experts: odd expert counts and widths, top-1 and top-k > 1, fused and separate
  // gate/up, with and without the per-expert down scale.
  {name: "moe-tiny", nVocab: 1024, window: 4},
  {name: "moe-top1", nVocab: 1024, window: 4},
  {name: "moe-wide", nVocab: 1024, window: 4},
  {name: "26b-a4b-shape", nVocab: 4096, cached: true, contextSize: 64},
  // Mixed K-quant files as people download them: Q4_K, Q5_K, Q6_K and Q8_0 per tensor, experts
  // included.
  {name: "tiny-kquant", nVocab: 1024, window: 4},
  {name: "moe-kquant", nVocab: 1024, window: 4},
  {name: "26b-a4b-mixed", nVocab: 4096, cached: true, contextSize: 64},
  // Ids as llama.cpp gives them for Google's Gemma GGUFs.
  {name: "gemma-vocab", nVocab: 262144, expectTokens: [2, 818, 5279, 529, 7001, 563]},
  {name: "gemma4-vocab", nVocab: 262144, extra: () => ["--vocab-gguf", GEMMA4_VOCAB()], expectTokens: [2, 818, 5279, 529, 7001, 563]},
];

function runMakeModel(args) {
  const started = performance.now();
  const r = spawnSync(makeModelScript, args, {encoding: "utf8", maxBuffer: 64 << 20});
  return {status: r.status, stdout: r.stdout, stderr: r.stderr, seconds: (performance.now() - started) / 1000};
}

function generate(preset, out, extra = []) {
  const r = runMakeModel(["--preset", preset, "--out", out, ...extra]);
  assert.equal(r.status, 0, `make-model --preset ${preset} failed:\n${r.stderr}`);
  return r.seconds;
}

// The first call may build the tool; later calls then time generation alone.
const built = runMakeModel(["--list-presets"]);

// 31b-shape is ~600 MB: generated once into build/models and reused while the tool is unchanged.
function cachedModel(preset) {
  const out = path.join(cacheDir, `${preset}.gguf`);
  const fresh = fs.existsSync(out) && fs.statSync(out).mtimeMs > fs.statSync(makeModelBinary).mtimeMs;
  if (fresh) return {file: out, seconds: null};
  fs.mkdirSync(cacheDir, {recursive: true});
  return {file: out, seconds: generate(preset, out)};
}

function sha256(file) {
  return crypto.createHash("sha256").update(fs.readFileSync(file)).digest("hex");
}

// Loops, not Math.max(...values): 262144 arguments overflow the stack.
function maxOf(values) {
  return values.reduce((m, v) => (v > m ? v : m), -Infinity);
}

function minOf(values) {
  return values.reduce((m, v) => (v < m ? v : m), Infinity);
}

function logSumExp(values) {
  const max = maxOf(values);
  let sum = 0;
  for (const v of values) sum += Math.exp(v - max);
  return max + Math.log(sum);
}

function assertSaneDistribution(logProbs, nVocab, what) {
  assert.equal(logProbs.length, nVocab, `${what}: one log-probability per vocabulary entry`);
  for (let id = 0; id < logProbs.length; ++id) {
    assert.ok(Number.isFinite(logProbs[id]), `${what}: log-probability of token ${id} is ${logProbs[id]}`);
  }
  assert.ok(Math.abs(logSumExp(logProbs)) < 1e-3, `${what}: log-probabilities sum to ${logSumExp(logProbs)}, not 0`);
  const max = maxOf(logProbs);
  const min = minOf(logProbs);
  assert.ok(Math.exp(max) < 0.99, `${what}: degenerate, top-1 probability ${Math.exp(max)}`);
  assert.ok(max - min > 1e-3, `${what}: all tokens equally likely`);
}

function argmax(values) {
  let best = 0;
  for (let i = 1; i < values.length; ++i) if (values[i] > values[best]) best = i;
  return best;
}

test("make-model lists the presets", () => {
  assert.equal(built.status, 0, built.stderr);
  for (const p of PRESETS) assert.match(built.stdout, new RegExp(`^${p.name}\\t`, "m"));
});

for (const preset of PRESETS) {
  test(`preset ${preset.name} loads in llama.cpp and predicts`, async (t) => {
    let file;
    let genSeconds;
    if (preset.cached) {
      ({file, seconds: genSeconds} = cachedModel(preset.name));
    } else {
      file = path.join(tmpDir, `${preset.name}.gguf`);
      genSeconds = generate(preset.name, file, preset.extra?.() ?? []);
    }
    const loadStarted = performance.now();
    const h = await loadLlama(file, {threads: 2, contextSize: preset.contextSize ?? 256});
    const loadSeconds = (performance.now() - loadStarted) / 1000;
    t.diagnostic(`${preset.name}: generate ${genSeconds === null ? "cached" : genSeconds.toFixed(2) + " s"}, ` +
                 `load ${loadSeconds.toFixed(2)} s, ${(fs.statSync(file).size / 1e6).toFixed(1)} MB`);
    try {
      assert.equal(h.nVocab, preset.nVocab);
      if (preset.expectTokens) assert.deepEqual(await tokenize(h, SHORT_PROMPT, {addBos: true}), preset.expectTokens);
      const prompts = preset.window ? [SHORT_PROMPT, LONG_PROMPT] : [SHORT_PROMPT];
      for (const prompt of prompts) {
        const ids = await tokenize(h, prompt, {addBos: true});
        if (prompt === LONG_PROMPT) assert.ok(ids.length > preset.window, `${ids.length} tokens do not pass the window`);
        const logProbs = await nextTokenLogProbs(h, ids);
        assertSaneDistribution(logProbs, preset.nVocab, `${preset.name} "${prompt}"`);
        const generated = await greedy(h, ids, 4);
        assert.equal(generated.length, 4);
        for (const id of generated) assert.ok(Number.isInteger(id) && id >= 0 && id < preset.nVocab, `token ${id}`);
        // Greedy's first pick is the most likely next token of the same prompt.
        assert.equal(logProbs[generated[0]], maxOf(logProbs));
      }
    } finally {
      await close(h);
    }
  });
}

test("the synthetic vocabulary makes words whole tokens", async () => {
  const file = path.join(tmpDir, "tiny-vocab.gguf");
  generate("tiny", file);
  const h = await loadLlama(file);
  try {
    const ids = await tokenize(h, SHORT_PROMPT, {addBos: true});
    assert.equal(ids.length, 6, `"${SHORT_PROMPT}" -> ${ids}`);
    assert.equal(ids[0], 2);
  } finally {
    await close(h);
  }
});

test("the chat template renders Gemma-4-style turns made of control tokens", async () => {
  const {Template} = await import(path.join(root, "js-glue", "node_modules", "@huggingface", "jinja", "dist", "index.js"));
  const {readGgufFileInfo} = await import(path.join(root, "js-glue", "node_modules", "node-llama-cpp", "dist", "index.js"));
  const file = path.join(tmpDir, "tiny-template.gguf");
  generate("tiny", file);
  const template = (await readGgufFileInfo(file)).metadata.tokenizer.chat_template;
  const rendered = new Template(template).render({
    messages: [{role: "user", content: "Hello"}, {role: "assistant", content: "Hi"}, {role: "user", content: "What is it?"}],
    add_generation_prompt: true,
    bos_token: "<bos>",
  });
  assert.equal(rendered, "<bos><|turn>user\nHello<turn|>\n<|turn>model\nHi<turn|>\n<|turn>user\nWhat is it?<turn|>\n<|turn>model\n");
  const h = await loadLlama(file);
  try {
    const ids = await tokenize(h, rendered, {addBos: false, special: true});
    const turnOpen = (await tokenize(h, "<|turn>", {addBos: false, special: true}));
    const turnClose = (await tokenize(h, "<turn|>", {addBos: false, special: true}));
    assert.equal(turnOpen.length, 1, "<|turn> is not one token");
    assert.equal(turnClose.length, 1, "<turn|> is not one token");
    assert.equal(ids[0], 2);
    assert.equal(ids.filter((id) => id === turnOpen[0]).length, 4);
    assert.equal(ids.filter((id) => id === turnClose[0]).length, 3);
  } finally {
    await close(h);
  }
});

test("--vocab gguf takes a GGUF's vocabulary and chat template; --chat-template FILE writes FILE's", async () => {
  const {readGgufFileInfo} = await import(path.join(root, "js-glue", "node_modules", "node-llama-cpp", "dist", "index.js"));
  const tokenizerOf = async (file) => (await readGgufFileInfo(file, {readTensorInfo: false})).metadata.tokenizer;
  const source = await tokenizerOf(GEMMA4_VOCAB());
  const own = path.join(tmpDir, "gemma4-own-template.gguf");
  generate("gemma4-vocab", own, ["--vocab-gguf", GEMMA4_VOCAB()]);
  const written = await tokenizerOf(own);
  assert.equal(written.chat_template, source.chat_template);
  for (const key of ["model", "tokens", "token_type", "merges", "bos_token_id", "eos_token_id", "unknown_token_id", "padding_token_id", "mask_token_id"]) {
    assert.ok(JSON.stringify(written.ggml[key]) === JSON.stringify(source.ggml[key]), key);
  }
  const given = path.join(tmpDir, "gemma4-given-template.gguf");
  generate("gemma4-vocab", given, ["--vocab-gguf", GEMMA4_VOCAB(), "--chat-template", GEMMA4_TEMPLATE()]);
  assert.equal((await tokenizerOf(given)).chat_template, fs.readFileSync(GEMMA4_TEMPLATE(), "utf8"));
  const tiny = path.join(tmpDir, "tiny-given-template.gguf");
  generate("tiny", tiny, ["--chat-template", GEMMA4_TEMPLATE()]);
  assert.equal((await tokenizerOf(tiny)).chat_template, fs.readFileSync(GEMMA4_TEMPLATE(), "utf8"));
});

test("same arguments give the same bytes; another seed does not", () => {
  for (const preset of ["tiny", "tiny-gemma3", "small", "tiny-shared-kv2"]) {
    const a = path.join(tmpDir, `${preset}-a.gguf`);
    const b = path.join(tmpDir, `${preset}-b.gguf`);
    const c = path.join(tmpDir, `${preset}-c.gguf`);
    generate(preset, a);
    generate(preset, b);
    generate(preset, c, ["--seed", "2"]);
    assert.equal(sha256(a), sha256(b), `${preset} is not deterministic`);
    assert.notEqual(sha256(a), sha256(c), `${preset}: --seed has no effect`);
  }
});

test("every matrix type and an untied output load and predict", async () => {
  for (const extra of [["--type", "Q8_0"], ["--type", "F16"], ["--type", "BF16"], ["--type", "F32"],
                       ["--untied-output"], ["--arch", "gemma3", "--head-dim", "32", "--n-head-kv", "2", "--type", "F16"]]) {
    const file = path.join(tmpDir, "variant.gguf");
    generate("tiny", file, extra);
    const h = await loadLlama(file);
    try {
      const logProbs = await nextTokenLogProbs(h, await tokenize(h, LONG_PROMPT));
      assertSaneDistribution(logProbs, 1024, `tiny ${extra.join(" ")}`);
    } finally {
      await close(h);
    }
  }
});

// Each preset's rules, and --tensor-type on top of them (the last matching rule wins), reach the
// file: read back with node-llama-cpp's GGUF reader.
test("mixed K-quant presets and --tensor-type write each matrix in its type", async () => {
  const {readGgufFileInfo} = await import(path.join(root, "js-glue", "node_modules", "node-llama-cpp", "dist", "index.js"));
  const GGML = {F32: 0, F16: 1, Q4_0: 2, Q8_0: 8, Q4_K: 12, Q5_K: 13, Q6_K: 14};
  const typesOf = async (file) =>
    Object.fromEntries((await readGgufFileInfo(file)).fullTensorInfo.map((t) => [t.name, t.ggmlType]));
  const moe = path.join(tmpDir, "moe-kquant-types.gguf");
  generate("moe-kquant", moe);
  const m = await typesOf(moe);
  for (const il of [0, 1, 2]) {
    const p = `blk.${il}.`;
    assert.equal(m[p + "ffn_gate_exps.weight"], GGML.Q4_K);
    assert.equal(m[p + "ffn_up_exps.weight"], GGML.Q5_K);
    assert.equal(m[p + "ffn_down_exps.weight"], GGML.Q6_K);
    assert.equal(m[p + "ffn_gate.weight"], GGML.Q8_0);
    assert.equal(m[p + "ffn_down.weight"], GGML.Q4_K);
    assert.equal(m[p + "attn_q.weight"], GGML.Q5_K);
    assert.equal(m[p + "attn_output.weight"], GGML.Q6_K);
    assert.equal(m[p + "ffn_gate_inp.weight"], GGML.F32);
    assert.equal(m[p + "ffn_norm.weight"], GGML.F32);
  }
  assert.equal(m["token_embd.weight"], GGML.Q6_K);

  const tiny = path.join(tmpDir, "tiny-kquant-rules.gguf");
  generate("tiny-kquant", tiny, ["--tensor-type", "blk.1.ffn_*=Q6_K", "--tensor-type", "blk.1.ffn_up=F16"]);
  const t = await typesOf(tiny);
  assert.equal(t["blk.0.ffn_gate.weight"], GGML.Q4_K);
  assert.equal(t["blk.0.ffn_down.weight"], GGML.Q5_K);
  assert.equal(t["blk.1.ffn_gate.weight"], GGML.Q6_K);
  assert.equal(t["blk.1.ffn_down.weight"], GGML.Q6_K);
  assert.equal(t["blk.1.ffn_up.weight"], GGML.F16);
  assert.equal(t["blk.0.attn_v.weight"], GGML.Q6_K);
  assert.equal(t["blk.0.attn_output.weight"], GGML.Q8_0);
  for (const [type, id] of [["Q4_K", GGML.Q4_K], ["Q5_K", GGML.Q5_K], ["Q6_K", GGML.Q6_K]]) {
    const file = path.join(tmpDir, `tiny-kquant-${type}.gguf`);
    generate("tiny-kquant", file, ["--tensor-type", `*=${type}`]);
    for (const info of (await readGgufFileInfo(file)).fullTensorInfo) {
      assert.equal(info.ggmlType, info.dimensions.length >= 2 ? id : GGML.F32, info.name);
    }
    const h = await loadLlama(file);
    try {
      assertSaneDistribution(await nextTokenLogProbs(h, await tokenize(h, LONG_PROMPT)), 1024, `tiny-kquant all ${type}`);
    } finally {
      await close(h);
    }
  }
});

// Gemma's final soft-cap bounds every logit to (-cap, cap), so log-probabilities that are
// log-softmax of the capped logits span less than 2·cap; the cap is monotonic, so the ranking
// stays that of the uncapped model.
test("log-probabilities include the final soft-cap", async () => {
  const results = {};
  for (const [label, extra] of [["default", []], ["capped", ["--softcap", "0.5"]]]) {
    const file = path.join(tmpDir, `softcap-${label}.gguf`);
    generate("tiny", file, extra);
    const h = await loadLlama(file);
    try {
      results[label] = await nextTokenLogProbs(h, await tokenize(h, LONG_PROMPT));
    } finally {
      await close(h);
    }
  }
  const span = (lp) => maxOf(lp) - minOf(lp);
  assert.ok(span(results.default) > 1.0, `the default model's span ${span(results.default)} is too small to test`);
  assert.ok(span(results.capped) <= 1.0 + 1e-4, `span ${span(results.capped)} exceeds 2·cap = 1`);
  assert.equal(argmax(results.capped), argmax(results.default));
});

// gemma3 stores its layout as a period; a non-default period must reach llama.cpp. With equal
// rope bases a sliding layer differs from a global one only once the prompt passes the window.
test("gemma3 sliding_window_pattern period is honoured", async () => {
  const common = ["--rope-base", "10000", "--rope-base-swa", "10000"];
  const logProbs = {};
  for (const pattern of ["SSG", "SSS"]) {
    const file = path.join(tmpDir, `gemma3-${pattern}.gguf`);
    generate("tiny-gemma3", file, [...common, "--swa-pattern", pattern]);
    const h = await loadLlama(file);
    try {
      logProbs[pattern] = {
        short: await nextTokenLogProbs(h, await tokenize(h, "The capital")),  // 3 tokens <= window 4
        long: await nextTokenLogProbs(h, await tokenize(h, LONG_PROMPT)),
      };
    } finally {
      await close(h);
    }
  }
  const maxDiff = (a, b) => a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0);
  assert.ok(maxDiff(logProbs.SSG.short, logProbs.SSS.short) < 1e-4, "layouts differ inside the window");
  assert.ok(maxDiff(logProbs.SSG.long, logProbs.SSS.long) > 1e-3,
            "period 3 (layer 2 global) evaluates like all-sliding: the key was ignored");
});

test("bad arguments fail with a clear message", () => {
  const out = path.join(tmpDir, "never.gguf");
  const cases = [
    [["--preset", "huge", "--out", out], /unknown preset 'huge'/],
    [["--preset", "tiny", "--out", out, "--type", "IQ4_XS"], /--type must be one of .*got 'IQ4_XS'/],
    [["--preset", "tiny", "--out", out, "--n-embd", "48"], /token_embd.weight: Q4_0 needs rows of a multiple of 32 elements, its rows have 48/],
    [["--preset", "tiny", "--out", out, "--swa-pattern", "SGS"], /3 letters but the model has 2 layers/],
    [["--preset", "tiny-gemma3", "--out", out, "--swa-pattern", "SGG"], /gemma3 can only express periodic patterns/],
    [["--preset", "tiny", "--out", out, "--n-vocab", "10"], /below the synthetic vocabulary's fixed part/],
    [["--preset", "tiny"], /--out FILE is required/],
    [["--preset", "tiny-shared-kv2", "--out", out, "--swa-pattern", "SGSSG"], /layer 1 must be sliding and layer 2 global/],
    [["--preset", "tiny", "--out", out, "--shared-kv-layers", "1"], /leaves fewer than 2 of the 2 layers with a KV cache/],
    [["--preset", "tiny", "--out", out, "--n-ff-layers", "128"], /--n-ff-layers has 1 widths but the model has 2 layers/],
    [["--preset", "tiny", "--out", out, "--n-ff-layers", "128,100"], /blk.1.ffn_down.weight: Q4_0 needs rows of a multiple of 32 elements, its rows have 100/],
    [["--preset", "tiny", "--out", out, "--n-embd-per-layer", "16"], /blk.0.proj.weight: Q4_0 .* its rows have 16/],
    [["--preset", "tiny-gemma3", "--out", out, "--n-embd-per-layer", "32"], /gemma4 features/],
    [["--preset", "moe-tiny", "--out", out, "--n-expert-used", "8"], /--n-expert-used must be in 1..--n-expert \(7\), got 8/],
    [["--preset", "moe-tiny", "--out", out, "--arch", "gemma3", "--head-dim", "32", "--n-head-kv", "2"], /--n-expert needs --arch gemma4/],
    [["--preset", "moe-tiny", "--out", out, "--n-ff-exp", "100"], /blk.0.ffn_down_exps.weight: Q4_0 .* its rows have 100/],
    // K-quants need rows of 256-multiples: refused by tensor name, never written in another type.
    [["--preset", "tiny", "--out", out, "--type", "Q4_K"], /token_embd.weight: Q4_K needs rows of a multiple of 256 elements, its rows have 64/],
    [["--preset", "26b-a4b-shape", "--out", out, "--tensor-type", "ffn_down_exps=Q6_K"],
     /blk.0.ffn_down_exps.weight: Q6_K needs rows of a multiple of 256 elements, its rows have 704/],
    [["--preset", "tiny-kquant", "--out", out, "--tensor-type", "blk.7.attn_q=Q8_0"], /--tensor-type blk.7.attn_q=Q8_0 matches no matrix/],
    [["--preset", "tiny-kquant", "--out", out, "--tensor-type", "attn_q=IQ4_NL"], /--tensor-type's TYPE must be one of .*got 'IQ4_NL'/],
    [["--preset", "tiny-kquant", "--out", out, "--tensor-type", "attn_q"], /--tensor-type needs PATTERN=TYPE, got 'attn_q'/],
    [["--preset", "gemma4-vocab", "--out", out], /--vocab gguf needs --vocab-gguf FILE/],
    [["--preset", "tiny", "--out", out, "--vocab", "gguf", "--vocab-gguf", path.join(tmpDir, "absent.gguf")], /cannot read GGUF/],
    [["--preset", "tiny", "--out", out, "--vocab", "gguf", "--vocab-gguf", makeModelScript], /bad magic: the file does not start with "GGUF"/],
    [["--preset", "tiny-gemma3", "--out", out, "--vocab", "gguf", "--vocab-gguf", GEMMA4_VOCAB()], /holds a gemma4 vocabulary; a gemma3 model needs a llama one/],
    [["--preset", "tiny", "--out", out, "--chat-template", path.join(tmpDir, "absent.jinja")], /cannot read chat template/],
  ];
  for (const [args, message] of cases) {
    const r = runMakeModel(args);
    assert.notEqual(r.status, 0, `${args.join(" ")} succeeded`);
    assert.match(r.stderr, message, `${args.join(" ")}`);
  }
  assert.ok(!fs.existsSync(out));
});
