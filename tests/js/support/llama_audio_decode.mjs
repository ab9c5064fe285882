// llama.cpp's decoding of an audio file (llama_programs/llama_audio_decode.cpp: the vendored
// miniaudio configured as mtmd-helper configures it), the reference for
// js-glue/src/audio/decode_audio.js.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

import {llamaVendorProgram} from "./llama_source.mjs";
import {runChecked} from "./run_async.mjs";

const source = path.join(path.dirname(new URL(import.meta.url).pathname), "llama_programs", "llama_audio_decode.cpp");

/**
 * bytes (an audio file) -> what mtmd-helper's decode_audio_from_buf gives at `rate`:
 * {ok: true, frames, framesRead, samples: Float32Array [frames]} (framesRead: what miniaudio's
 * read returned; mtmd keeps all `frames`, zeros past it) or {ok: false, step} (the miniaudio
 * call that failed: "init", "length" or "read").
 * @example const ref = await llamaDecodeAudio(fs.readFileSync("speech.mp3"));
 */
export async function llamaDecodeAudio(bytes, rate = 16000) {
  const program = await llamaVendorProgram(source);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lf-audio-"));
  try {
    const input = path.join(dir, "in"), output = path.join(dir, "out.f32");
    fs.writeFileSync(input, bytes);
    const result = JSON.parse(await runChecked(program, [input, String(rate), output]));
    if (!result.ok) return result;
    const raw = fs.readFileSync(output);
    return {...result, samples: new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength))};
  } finally {
    fs.rmSync(dir, {recursive: true, force: true});
  }
}
