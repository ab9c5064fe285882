// The MP3 and FLAC decoders' WASM taken out of their packages (js-glue/src/audio/decoder_wasm.js)
// and handed to decodeAudio in workerd, which compiles no WASM at run time: the worker decodes
// each format to the samples Node's decodeAudio gives, and refuses what Node refuses.
import assert from "node:assert/strict";
import {execFileSync} from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {test} from "node:test";

import {decodeAudio, useAudioDecoders} from "../../../js-glue/src/audio/decode_audio.js";
import {audioDecoderWasm} from "../../../js-glue/src/audio/decoder_wasm.js";
import {importHostPackage} from "../support/host_package.mjs";
import {root} from "../support/models.mjs";
import {startWorkerd} from "../support/workerd.mjs";

const {build} = await importHostPackage("esbuild");
useAudioDecoders();

// The decoders' packages also export Web Worker variants, which extend the global Worker when
// their module loads; workerd has none, so a worker bundle stands a class in for it (the
// variants are never used).
const noWebWorker = {
  name: "no-web-worker",
  setup(b) {
    b.onResolve({filter: /^@eshaz\/web-worker$/}, () => ({path: "web-worker", namespace: "no-web-worker"}));
    b.onLoad({filter: /.*/, namespace: "no-web-worker"}, () => ({contents: "export default class {}", loader: "js"}));
  },
};

const worker = `
import {decodeAudio, useAudioDecoders} from ${JSON.stringify(path.join(root, "js-glue", "src", "audio", "decode_audio.js"))};
import mp3 from "./mpg123.wasm";
import flac from "./flac.wasm";
useAudioDecoders({mp3, flac});
export default {
  async fetch(request) {
    try {
      const {samples, format} = await decodeAudio(new Uint8Array(await request.arrayBuffer()));
      return new Response(samples.buffer, {headers: {"x-format": format}});
    } catch (error) {
      return Response.json({code: error.code, message: error.message}, {status: 400});
    }
  },
};
`;

test("decodeAudio in workerd with the decoders' WASM handed over: Node's samples for WAV, FLAC and MP3", async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lf-audio-workerd-"));
  t.after(() => fs.rmSync(dir, {recursive: true, force: true}));
  const wasm = await audioDecoderWasm();
  fs.writeFileSync(path.join(dir, "mpg123.wasm"), wasm.mp3);
  fs.writeFileSync(path.join(dir, "flac.wasm"), wasm.flac);
  fs.writeFileSync(path.join(dir, "entry.js"), worker);
  await build({
    entryPoints: [path.join(dir, "entry.js")], outfile: path.join(dir, "worker.js"), bundle: true, format: "esm",
    platform: "browser", conditions: ["workerd", "worker", "browser"], target: "es2022", external: ["*.wasm"],
    nodePaths: [path.join(root, "js-glue", "node_modules")], plugins: [noWebWorker], logLevel: "warning",
  });
  const mf = await startWorkerd(t, dir);

  // a second of stereo 44.1 kHz 16-bit PCM (a sweep), and FLAC and MP3 encoded from it
  const rate = 44100, frames = rate;
  const pcm = Buffer.alloc(44 + 4 * frames);
  pcm.write("RIFF", 0); pcm.writeUInt32LE(36 + 4 * frames, 4); pcm.write("WAVEfmt ", 8);
  pcm.writeUInt32LE(16, 16); pcm.writeUInt16LE(1, 20); pcm.writeUInt16LE(2, 22); pcm.writeUInt32LE(rate, 24);
  pcm.writeUInt32LE(4 * rate, 28); pcm.writeUInt16LE(4, 32); pcm.writeUInt16LE(16, 34); pcm.write("data", 36); pcm.writeUInt32LE(4 * frames, 40);
  for (let i = 0; i < frames; i++) {
    const t = i / rate;
    pcm.writeInt16LE(Math.round(16000 * Math.sin(2 * Math.PI * (200 + 4000 * t) * t)), 44 + 4 * i);
    pcm.writeInt16LE(Math.round(12000 * Math.sin(2 * Math.PI * 330 * t)), 46 + 4 * i);
  }
  const wavFile = path.join(dir, "in.wav");
  fs.writeFileSync(wavFile, pcm);
  execFileSync("flac", ["-s", "-f", wavFile, "-o", `${wavFile}.flac`]);
  execFileSync("lame", ["--quiet", wavFile, `${wavFile}.mp3`]);

  for (const [format, bytes] of [["WAV", pcm], ["MP3", fs.readFileSync(`${wavFile}.mp3`)], ["FLAC", fs.readFileSync(`${wavFile}.flac`)]]) {
    const response = await mf.dispatchFetch("http://worker/", {method: "POST", body: bytes});
    assert.equal(response.status, 200, `${format}: ${await response.clone().text()}`);
    assert.equal(response.headers.get("x-format"), format);
    const inWorker = new Float32Array(await response.arrayBuffer());
    assert.deepEqual(inWorker, (await decodeAudio(bytes)).samples, `${format}: the worker's samples are Node's`);
  }
  const refused = await mf.dispatchFetch("http://worker/", {method: "POST", body: pcm.subarray(0, 1000)});
  assert.equal(refused.status, 400);
  assert.deepEqual(await refused.json(), {code: "invalid_audio", message: "the WAV file is truncated: its data chunk says 176400 bytes, 956 are there"});
});
