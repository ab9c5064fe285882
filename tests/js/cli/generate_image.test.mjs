// layerfold generate --chat --image FILE --mmproj PATH: the image before the prompt's text in the
// user's message gives llama.cpp's greedy tokens for the same chat (its template rendering with
// a media marker, then mtmd: llama_vision_prompt), with a q8_0 cache where our arithmetic mirrors
// llama.cpp's; what it cannot do is refused by name.
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {test} from "node:test";

import {gemma4} from "../support/gateway_fixture.mjs";
import {importHostPackage} from "../support/host_package.mjs";
import {rgbImage} from "../support/llama_vision.mjs";
import {mirroredImageChat} from "../support/llama_vision_prompt.mjs";
import {model} from "../support/models.mjs";
import {cli} from "../support/server_process.mjs";

const {encode: encodePng} = await importHostPackage("fast-png");
const [WIDTH, HEIGHT] = [37, 23];
const projector = () => model("mmproj-tiny", "tiny", ["--mmproj", "--vision-tower", "tiny"]);

function generate(args) {
  const r = spawnSync(process.execPath, [cli, "generate", "--model", gemma4(), ...args], {encoding: "utf8", timeout: 120_000});
  return {status: r.status, stdout: r.stdout, stderr: r.stderr};
}

test("generate --image: llama.cpp's greedy tokens for the same chat", async (t) => {
  const ref = await mirroredImageChat(projector(), rgbImage(WIDTH, HEIGHT), WIDTH, HEIGHT,
    [{type: "media_marker", text: "<__media__>"}, {type: "text", text: "What is it?"}], {greedy: 6});
  if (!ref) {
    t.skip("llama.cpp's kernels on this host are not the engine's for this model and cache");
    return;
  }
  const png = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "lf-image-")), "image.png");
  fs.writeFileSync(png, encodePng({width: WIDTH, height: HEIGHT, data: fs.readFileSync(rgbImage(WIDTH, HEIGHT)), channels: 3}));
  const r = generate(["--chat", "--image", png, "--mmproj", projector(), "--image-max-tokens", "128", "--prompt", "What is it?",
    "--max-tokens", "6", "--cache-type-k", "q8_0", "--cache-type-v", "q8_0", "--json"]);
  assert.equal(r.status, 0, r.stderr);
  const result = JSON.parse(r.stdout.trim().split("\n").at(-1));
  assert.deepEqual(result.tokens, ref.greedy.slice(0, result.tokens.length));
  assert.ok(result.tokens.length > 0);
  assert.equal(result.timings.prompt_n, ref.chunks.reduce((n, c) => n + (c.type === "text" ? c.tokens.length : c.n_tokens), 0));
});

test("generate --image refuses what it cannot do, by name", () => {
  const image = rgbImage(WIDTH, HEIGHT);
  for (const [args, message] of [
    [["--image", image, "--prompt", "x"], /--image goes with --chat/],
    [["--chat", "--image", image, "--prompt", "x"], /--image needs --mmproj PATH\|URL/],
    [["--chat", "--image", "/nonexistent/a.png", "--mmproj", projector(), "--prompt", "x"], /--image \/nonexistent\/a\.png: no such file/],
    [["--chat", "--image", image, "--mmproj", projector(), "--prompt", "x"], /--image .*\.rgb: /],
  ]) {
    const r = generate(args);
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, message);
  }
});
