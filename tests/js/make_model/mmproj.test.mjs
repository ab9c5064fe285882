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
