// `layerfold make-model`: the package's generator (js-glue/dist/make_model.js) makes, byte for
// byte, what the native tool behind scripts/make-model makes for the same arguments (the Gemma
// vocabulary from the package's packed tokenizer.json included), and refuses what the tool
// refuses with its own message.
import assert from "node:assert/strict";
import {createHash} from "node:crypto";
import {spawnSync} from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {test} from "node:test";

import {model, root} from "../support/models.mjs";

const cli = path.join(root, "js-glue", "bin", "layerfold.js");
const sha256 = (file) => createHash("sha256").update(fs.readFileSync(file)).digest("hex");
const layerfold = (...args) => spawnSync(process.execPath, [cli, ...args], {encoding: "utf8"});

test("make-model writes the native generator's bytes, the Gemma vocabulary and overrides included", (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lf-make-model-"));
  t.after(() => fs.rmSync(dir, {recursive: true, force: true}));
  for (const [preset, extra] of [["tiny", []], ["gemma-vocab", []], ["small", ["--n-layer", "2", "--type", "Q8_0"]]]) {
    const out = path.join(dir, `${preset}.gguf`);
    const r = layerfold("make-model", "--preset", preset, "--out", out, ...extra);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout + r.stderr, new RegExp(`wrote ${out.replaceAll(".", "\\.")}`));
    assert.equal(sha256(out), sha256(model(`make-model-${preset}`, preset, extra)), `${preset} ${extra.join(" ")}`);
  }
});

test("make-model refuses what the generator refuses, exit non-zero, nothing written", (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lf-make-model-"));
  t.after(() => fs.rmSync(dir, {recursive: true, force: true}));
  const out = path.join(dir, "x.gguf");
  for (const [args, why] of [[["--preset", "nope"], /unknown preset 'nope'/], [["--preset", "tiny", "--n-layer", "abc"], /--n-layer/]]) {
    const r = layerfold("make-model", ...args, "--out", out);
    assert.notEqual(r.status, 0, `${args.join(" ")}: ${r.stdout}`);
    assert.match(r.stderr, why);
    assert.ok(!fs.existsSync(out));
  }
  const presets = layerfold("make-model", "--list-presets");
  assert.equal(presets.status, 0, presets.stderr);
  assert.match(presets.stdout, /^tiny\t/m);
});
