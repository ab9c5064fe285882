// The oracle over many small shapes (docs/forward-pass.md, "Where agreement depends on the
// shape"): FFN widths, n_embd, head counts and dims, windows, prompt and layer counts, tied and
// untied heads, both architectures, Q4_0 and Q8_0. Each case is judged by what llama.cpp runs for
// it on this host (tests/js/support/oracle_judge.mjs): strictly where the engine mirrors its kernels,
// by the distance to a float64 reference of the same model elsewhere.
import {execFileSync} from "node:child_process";
import path from "node:path";
import {after, before, describe, test} from "node:test";

import {F64Reference} from "../support/f64_reference.mjs";
import * as llama from "../support/llama_oracle.mjs";
import {model, root} from "../support/models.mjs";
import {judge, llamaKernels, mirrors, modelTraits} from "../support/oracle_judge.mjs";

const lfRun = path.join(root, "build", "native", "lf_run");
const GREEDY_STEPS = 16;
const PROMPTS = [7, 1, 2, 3];

const prompt = (n, seed) => [2, ...Array.from({length: n - 1}, (_, i) => 10 + ((i * 37 + seed * 11) % 500))];

// gemma4 `tiny` with these overrides; `n` is the prompt length.
const g4 = (layers, pattern, extra) => ["--n-layer", String(layers), "--swa-pattern", pattern, ...extra];
const CASES = [
  {name: "e128-h4kv2-d32-ff512-w8", preset: "tiny", args: g4(2, "SS", ["--n-embd", "128", "--n-head", "4", "--n-head-kv-swa", "2", "--head-dim-swa", "32", "--n-ff", "512", "--sliding-window", "8", "--untied-output"]), n: 14},
  {name: "e256-h8kv4-d32-ff704-SG", preset: "tiny", args: g4(2, "SG", ["--n-embd", "256", "--n-head", "8", "--n-head-kv-swa", "4", "--n-head-kv-global", "1", "--head-dim-swa", "32", "--head-dim-global", "32", "--n-ff", "704", "--sliding-window", "16"]), n: 20},
  {name: "e384-h12kv3-d32-ff1280", preset: "tiny", args: g4(2, "SS", ["--n-embd", "384", "--n-head", "12", "--n-head-kv-swa", "3", "--head-dim-swa", "32", "--n-ff", "1280", "--untied-output", "--output-norm-gain", "1", "--sliding-window", "16"]), n: 14},
  {name: "e384-d32-ff1536-5L", preset: "tiny", args: g4(5, "SSGSG", ["--n-embd", "384", "--n-head", "12", "--n-head-kv-swa", "3", "--n-head-kv-global", "1", "--head-dim-swa", "32", "--head-dim-global", "32", "--n-ff", "1536", "--untied-output", "--output-norm-gain", "1", "--sliding-window", "16"]), n: 14},
  {name: "e96-h3kv1-d32-ff2048-w4", preset: "tiny", args: g4(3, "SSG", ["--n-embd", "96", "--n-head", "3", "--n-head-kv-swa", "1", "--n-head-kv-global", "1", "--head-dim-swa", "32", "--head-dim-global", "32", "--n-ff", "2048", "--sliding-window", "4", "--untied-output"]), n: 20},
  {name: "q8-e192-h6kv2-d32-ff768", preset: "tiny", args: g4(3, "SSG", ["--type", "Q8_0", "--n-embd", "192", "--n-head", "6", "--n-head-kv-swa", "2", "--n-head-kv-global", "1", "--head-dim-swa", "32", "--head-dim-global", "32", "--n-ff", "768", "--sliding-window", "8"]), n: 24},
  {name: "e256-d32-ff1024-p51", preset: "tiny", args: g4(2, "SG", ["--n-embd", "256", "--n-head", "8", "--n-head-kv-swa", "2", "--n-head-kv-global", "2", "--head-dim-swa", "32", "--head-dim-global", "32", "--n-ff", "1024", "--sliding-window", "16", "--untied-output", "--output-norm-gain", "1"]), n: 51},
  {name: "gemma3-e128-h4kv2-d32-ff512", preset: "tiny-gemma3", args: ["--n-embd", "128", "--n-head", "4", "--n-head-kv", "2", "--head-dim", "32", "--n-ff", "512", "--untied-output"], n: 14},
  {name: "e384-h6kv3-d64-ff1280", preset: "tiny", args: g4(2, "SS", ["--n-embd", "384", "--n-head", "6", "--n-head-kv-swa", "3", "--head-dim-swa", "64", "--n-ff", "1280", "--untied-output", "--output-norm-gain", "1", "--sliding-window", "16"]), n: 14},
  {name: "e384-d64-d128-ff1536-5L", preset: "tiny", args: g4(5, "SSGSG", ["--n-embd", "384", "--n-head", "6", "--n-head-kv-swa", "3", "--n-head-kv-global", "1", "--head-dim-swa", "64", "--head-dim-global", "128", "--n-ff", "1536", "--untied-output", "--output-norm-gain", "1", "--sliding-window", "16"]), n: 14},
  {name: "e256-h2kv1-d256-ff512", preset: "tiny", args: g4(2, "SG", ["--n-embd", "256", "--n-head", "2", "--n-head-kv-swa", "1", "--n-head-kv-global", "1", "--head-dim-swa", "256", "--head-dim-global", "256", "--n-ff", "512", "--sliding-window", "8"]), n: 12},
  {name: "e256-h2kv1-d256-d512-ff768-SSG", preset: "tiny", args: g4(3, "SSG", ["--n-embd", "256", "--n-head", "2", "--n-head-kv-swa", "1", "--n-head-kv-global", "1", "--head-dim-swa", "256", "--head-dim-global", "512", "--n-ff", "768", "--sliding-window", "8", "--untied-output", "--output-norm-gain", "1"]), n: 18},
  {name: "gemma3-e256-h4kv2-d64-ff1024", preset: "tiny-gemma3", args: ["--n-embd", "256", "--n-head", "4", "--n-head-kv", "2", "--head-dim", "64", "--n-ff", "1024", "--untied-output"], n: 14},
  {name: "q8-e256-h4kv1-d64-d128-ff768", preset: "tiny", args: g4(3, "SSG", ["--type", "Q8_0", "--n-embd", "256", "--n-head", "4", "--n-head-kv-swa", "1", "--n-head-kv-global", "1", "--head-dim-swa", "64", "--head-dim-global", "128", "--n-ff", "768", "--sliding-window", "8"]), n: 20},
];

function ours(file, tokens) {
  const args = ["--model", file, "--tokens", tokens.join(","), "--logprobs", "--greedy", String(GREEDY_STEPS)];
  const out = JSON.parse(execFileSync(lfRun, args, {encoding: "utf8", maxBuffer: 256 << 20}));
  return {logProbs: Float64Array.from(out.logprobs), greedy: out.greedy};
}

describe("llama.cpp agreement over shapes", () => {
  let kernels;
  const measured = [];
  before(async () => {
    kernels = await llamaKernels();
    console.log(kernels.line);
  });
  after(() => {
    for (const m of measured) console.log(JSON.stringify(m));
  });

  for (const c of CASES) {
    test(c.name, {timeout: 600_000}, async (t) => {
      const file = model(`sweep-${c.name}`, c.preset, c.args);
      const reference = F64Reference.open(file);
      t.after(() => reference.close());
      const handle = await llama.loadLlama(file, {threads: 2, contextSize: 256});
      t.after(() => llama.close(handle));
      const runs = [];
      for (const seed of PROMPTS) {
        const tokens = prompt(c.n, seed);
        runs.push({label: seed, tokens, ours: ours(file, tokens),
                   theirs: {logProbs: await llama.nextTokenLogProbs(handle, tokens), greedy: await llama.greedy(handle, tokens, GREEDY_STEPS)}});
      }
      const mirrored = mirrors(kernels, modelTraits(reference, c.n));
      await judge({what: c.name, mirrored, runs, exact: (tokens) => reference.nextTokenLogProbs(tokens), handle,
                   record: (figures) => measured.push(figures)});
    });
  }
});
