// make-model --mmproj-for TARGET.gguf: the vision projector of the model in a file, its width read
// from the file's header: the same bytes as --mmproj on the line that made the target, rows of
// the target's width whatever it is (the engine's encoder says so), and what a projector line
// cannot take refused by name.
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {after, test} from "node:test";

import {openGgufHeader} from "../../../js-glue/src/gguf/header.js";
import {openSource} from "../../../js-glue/src/sources/open_source.js";
import {VisionEncoder} from "../../../js-glue/src/vision/encoder.js";
import {loadSingleThreadModule} from "../../../js-glue/src/wasm/load_node.js";
import {model, root} from "../support/models.mjs";

const makeModel = path.join(root, "scripts", "make-model");
const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), "lf-mmproj-"));
after(() => fs.rmSync(tmpDir, {recursive: true, force: true}));

const run = (args) => spawnSync(makeModel, args, {encoding: "utf8", maxBuffer: 64 << 20});

test("--mmproj-for gives --mmproj's bytes for the line that made the target, at the target's width", async () => {
  const lf = await loadSingleThreadModule();
  try {
    // [target, its preset, the options the projector line shares with the target's, tower]; a
    // header is all --mmproj-for reads.
    for (const [name, preset, extra, tower] of [["tiny", "tiny", ["--type", "Q4_0"], "tiny"], ["mmproj-for-wide", "tiny", ["--n-embd", "96"], "tiny"],
      ["e2b-shape-header", "e2b-shape", [], "auto"]]) {
      const target = model(name, preset, name.endsWith("-header") ? ["--header-only"] : extra);
      const fromFile = path.join(tmpDir, `${name}-for.gguf`), fromLine = path.join(tmpDir, `${name}-line.gguf`);
      const vision = ["--vision-tower", tower, "--vision-layers", "1"];
      const a = run(["--mmproj-for", target, ...vision, "--out", fromFile]);
      assert.equal(a.status, 0, a.stderr);
      const b = run(["--preset", preset, ...extra, "--mmproj", ...vision, "--out", fromLine]);
      assert.equal(b.status, 0, b.stderr);
      assert.ok(fs.readFileSync(fromFile).equals(fs.readFileSync(fromLine)), `${name}: the projectors differ`);
      const encoder = await VisionEncoder.open(lf, await openSource(fromFile));
      const width = {tiny: 64, "mmproj-for-wide": 96, "e2b-shape-header": 1536}[name];
      assert.equal(encoder.nEmbdText, width, `${name}: rows of the target's width`);
      encoder.close();
    }
  } finally {
    lf.close();
  }
});

test("what a projector line cannot take is refused by name", () => {
  const out = path.join(tmpDir, "refused.gguf");
  const target = model("tiny", "tiny", ["--type", "Q4_0"]);
  for (const [args, message] of [
    [["--mmproj-for", path.join(tmpDir, "absent.gguf"), "--out", out], /cannot read GGUF/],
    [["--mmproj-for", target, "--preset", "tiny", "--out", out], /--preset describes a target; --mmproj-for reads the target from its file/],
    [["--mmproj-for", target, "--n-embd", "64", "--out", out], /--n-embd describes a target; --mmproj-for reads/],
    [["--mmproj-for", target, "--assistant-n-embd", "64", "--out", out], /--assistant-n-embd is not for a projector; --mmproj-for reads/],
    [["--mmproj-for", target, "--assistant", "--out", out], /--mmproj and --assistant write different files: give one/],
  ]) {
    const r = run(args);
    assert.notEqual(r.status, 0, args.join(" "));
    assert.match(r.stderr, message);
    assert.ok(!fs.existsSync(out), "nothing written");
  }
});

// make-model --audio: Google's E2B / E4B audio tower (docs/audio.md) as the converter writes it,
// every name, shape and type from the facts: google/gemma-4-E2B and -E4B's audio_config (1024
// wide, 12 blocks, 8 heads, 128 mel bins, subsampling channels 128 and 32, depthwise kernel 5,
// output_proj_dims 1536) and convert_hf_to_gguf's rules (audio convolutions and the input
// projection F32, 1-D tensors F32, matrices in the file's type).
const AUDIO_KEYS = {
  "clip.has_audio_encoder": true, "clip.audio.projector_type": "gemma4a", "clip.audio.embedding_length": 1024,
  "clip.audio.feed_forward_length": 4096, "clip.audio.attention.head_count": 8, "clip.audio.num_mel_bins": 128,
};
const CLIPPED = ["input_min", "input_max", "output_min", "output_max"];

// name -> [type, ne] of the audio tensors for n blocks and a target of width nText.
function audioTensors(nBlocks, nText) {
  const t = {
    "a.conv1d.0.weight": ["F32", [3, 3, 1, 128]], "a.conv1d.0.norm.weight": ["F32", [128]],
    "a.conv1d.1.weight": ["F32", [3, 3, 128, 32]], "a.conv1d.1.norm.weight": ["F32", [32]],
    "a.input_projection.weight": ["F32", [32 * 32, 1024]],
    "a.pre_encode.out.weight": ["F16", [1024, 1536]], "a.pre_encode.out.bias": ["F32", [1536]],
    "mm.a.input_projection.weight": ["F16", [1536, nText]],
  };
  for (let il = 0; il < nBlocks; il++) {
    const b = `a.blk.${il}.`;
    const clipped = (stem, nIn, nOut) => {
      t[`${b}${stem}.weight`] = ["F16", [nIn, nOut]];
      for (const bound of CLIPPED) t[`${b}${stem}.${bound}`] = ["F32", [1]];
    };
    for (const norm of ["ffn_norm", "ffn_post_norm", "ffn_norm_1", "ffn_post_norm_1", "attn_pre_norm", "attn_post_norm",
      "conv_norm", "norm_conv", "ln2"]) t[`${b}${norm}.weight`] = ["F32", [1024]];
    for (const sfx of ["", "_1"]) {
      clipped(`ffn_up${sfx}`, 1024, 4096);
      clipped(`ffn_down${sfx}`, 4096, 1024);
    }
    for (const proj of ["attn_q", "attn_k", "attn_v", "attn_out", "conv_pw2"]) clipped(proj, 1024, 1024);
    clipped("conv_pw1", 1024, 2048);
    t[`${b}per_dim_scale.weight`] = ["F32", [128]];
    t[`${b}attn_k_rel.weight`] = ["F16", [1024, 1024]];
    t[`${b}conv_dw.weight`] = ["F32", [5, 1024]];
  }
  return t;
}

async function readHeader(lf, file) {
  const source = await openSource(file);
  try {
    const {gguf, header} = await openGgufHeader(lf, source);
    lf.fn.lf_gguf_free(gguf);
    return header;
  } finally {
    await source.close();
  }
}

test("--audio adds Google's E2B/E4B audio tower: keys, names, shapes and types, --audio-layers cutting blocks", async () => {
  const lf = await loadSingleThreadModule();
  try {
    for (const [preset, layers, nText] of [["e2b-shape", 12, 1536], ["e4b-shape", 12, 2560], ["e2b-shape", 2, 1536]]) {
      const out = path.join(tmpDir, `audio-${preset}-${layers}.gguf`);
      const r = run(["--preset", preset, "--mmproj", "--audio", ...(layers === 12 ? [] : ["--audio-layers", String(layers)]),
        "--header-only", "--out", out]);
      assert.equal(r.status, 0, r.stderr);
      const header = await readHeader(lf, out);
      for (const [key, value] of Object.entries({...AUDIO_KEYS, "clip.audio.block_count": layers, "clip.audio.projection_dim": nText})) {
        assert.equal(header.metadata[key], value, `${preset}: ${key}`);
      }
      assert.ok(Math.abs(header.metadata["clip.audio.attention.layer_norm_epsilon"] - 1e-6) < 1e-12);
      assert.equal(header.metadata["clip.has_vision_encoder"], true, "the vision tower stays");
      const want = audioTensors(layers, nText);
      const got = Object.fromEntries(header.tensors.filter((t) => /^(a|mm\.a)\./.test(t.name)).map((t) => [t.name, [t.type, t.ne]]));
      assert.deepEqual(Object.keys(got).sort(), Object.keys(want).sort(), `${preset}: the audio tensors`);
      // Google's E4B projector carries 751 a.* tensors (docs/audio.md, "Google's tower").
      if (layers === 12) assert.equal(Object.keys(got).filter((name) => name.startsWith("a.")).length, 751);
      for (const [name, [type, ne]] of Object.entries(want)) assert.deepEqual(got[name], [type, ne], `${preset}: ${name}`);
    }
  } finally {
    lf.close();
  }
});

test("--mmproj-for --audio gives the line's bytes; the clipped linears' bounds bracket zero", async () => {
  const target = model("e2b-shape-header", "e2b-shape", ["--header-only"]);
  const audio = ["--vision-layers", "1", "--audio", "--audio-layers", "1"];
  const fromFile = path.join(tmpDir, "audio-for.gguf"), fromLine = path.join(tmpDir, "audio-line.gguf");
  const a = run(["--mmproj-for", target, ...audio, "--out", fromFile]);
  assert.equal(a.status, 0, a.stderr);
  const b = run(["--preset", "e2b-shape", "--mmproj", ...audio, "--out", fromLine]);
  assert.equal(b.status, 0, b.stderr);
  const bytes = fs.readFileSync(fromFile);
  assert.ok(bytes.equals(fs.readFileSync(fromLine)), "the projectors differ");
  const lf = await loadSingleThreadModule();
  try {
    const header = await readHeader(lf, fromFile);
    const value = (name) => {
      const t = header.tensors.find((x) => x.name === name);
      return bytes.readFloatLE(t.offset);  // the offset in the file
    };
    for (const stem of ["a.blk.0.attn_q", "a.blk.0.ffn_down_1", "a.blk.0.conv_pw1"]) {
      const [inMin, inMax, outMin, outMax] = CLIPPED.map((bound) => value(`${stem}.${bound}`));
      assert.ok(inMin < -1 && inMax > 1 && outMin < -1 && outMax > 1, `${stem}: bounds ${[inMin, inMax, outMin, outMax]}`);
    }
  } finally {
    lf.close();
  }
});

test("--audio is refused for a target without an audio tower, and without a projector", () => {
  const out = path.join(tmpDir, "audio-refused.gguf");
  const wide = model("31b-shape-header", "31b-shape", ["--header-only"]);
  for (const [args, message] of [
    [["--preset", "31b-shape", "--mmproj", "--audio", "--out", out], /--audio: the target \(width 5376, no per-layer embeddings: a gemma-4-31B or 26B-A4B shape\) has no audio encoder/],
    [["--preset", "26b-a4b-shape", "--mmproj", "--audio", "--out", out], /width 2816, no per-layer embeddings.*has no audio encoder/],
    [["--mmproj-for", wide, "--audio", "--out", out], new RegExp(`'${wide.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}': --audio: the target \\(width 5376`)],
    [["--preset", "e2b-shape", "--audio", "--out", out], /--audio adds an encoder to a projector: give --mmproj or --mmproj-for too/],
    [["--preset", "e2b-shape", "--mmproj", "--audio-layers", "2", "--out", out], /--audio-layers needs --audio/],
    [["--preset", "e2b-shape", "--mmproj", "--audio", "--audio-layers", "300", "--out", out], /--audio-layers must be 1 to 256/],
  ]) {
    const r = run(args);
    assert.notEqual(r.status, 0, args.join(" "));
    assert.match(r.stderr, message);
    assert.ok(!fs.existsSync(out), "nothing written");
  }
});
