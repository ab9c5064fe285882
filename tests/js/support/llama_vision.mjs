// llama.cpp's Gemma 4 vision tower (llama_programs/llama_vision.cpp, mtmd compiled against the
// oracle's libggml) and ours (build/native/lf_vision), on the same projector and raw RGB image.
import {execFileSync} from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

import {llamaBins, llamaMtmdProgram} from "./llama_source.mjs";
import {root} from "./models.mjs";
import {runChecked} from "./run_async.mjs";

const source = path.join(path.dirname(new URL(import.meta.url).pathname), "llama_programs", "llama_vision.cpp");
const lfVision = path.join(root, "build", "native", "lf_vision");

/**
 * A deterministic width × height RGB image (gradients and a checker pattern, so resizing and
 * patching have structure to get wrong), written to a temporary file: its path.
 * @example const file = rgbImage(37, 23);
 */
export function rgbImage(width, height) {
  const bytes = Buffer.alloc(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = 3 * (y * width + x);
      bytes[i] = Math.floor((255 * x) / Math.max(1, width - 1));
      bytes[i + 1] = Math.floor((255 * y) / Math.max(1, height - 1));
      bytes[i + 2] = ((x >> 2) + (y >> 2)) % 2 ? 230 : 20;
    }
  }
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "lf-vision-")), `${width}x${height}.rgb`);
  fs.writeFileSync(file, bytes);
  return file;
}


/**
 * llama.cpp's preprocessed size, soft-token count and embeddings: {width, height, n_tokens, n_embd, encode_ms, embd}
 * (encode_ms: the fastest of `reps` preprocessings and encodes).
 * @example const ref = await llamaVision(mmproj, file, 37, 23, {threads: 2});
 */
export async function llamaVision(mmproj, image, width, height, {threads = 2, maxTokens = -1, reps = 1} = {}) {
  const args = [mmproj, image, String(width), String(height), llamaBins, String(threads), String(maxTokens), String(reps)];
  return JSON.parse(await runChecked(await llamaMtmdProgram(source), args));
}

/**
 * The engine's, in the same shape, with its raw stdout (for byte comparisons across threads).
 * @example const ours = lfVisionRun(mmproj, file, 37, 23, {threads: 3});
 */
export function lfVisionRun(mmproj, image, width, height, {threads = 1, maxTokens = 0} = {}) {
  const args = [mmproj, image, String(width), String(height), "--threads", String(threads), "--max-tokens", String(maxTokens)];
  const raw = execFileSync(lfVision, args, {encoding: "utf8", maxBuffer: 1 << 30, stdio: ["ignore", "pipe", "pipe"]});
  return {...JSON.parse(raw), raw};
}
