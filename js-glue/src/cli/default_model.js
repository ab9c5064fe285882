// The built-in default model: a synthetic Gemma 4 with the real architecture and the real Gemma
// vocabulary, made once and cached, so `layerfold validate` works with no weights to download.
// The package makes it itself, in this process, with the generator built as a module
// (dist/make_model.js, the native tool's command line) and the vocabulary beside it
// (dist/gemma_tokenizer.json.gz): the same code path in a checkout and in an installed package.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import zlib from 'node:zlib';

const require = createRequire(import.meta.url);
const distFile = (name) => fileURLToPath(new URL(`../../dist/${name}`, import.meta.url));
const PRESET = 'gemma-vocab';

/**
 * Where layerfold keeps what it makes or fetches: LAYERFOLD_CACHE_DIR, else
 * $XDG_CACHE_HOME/layerfold, else ~/.cache/layerfold.
 * @example path.join(cacheDir(), 'objects')
 */
export function cacheDir() {
  return process.env.LAYERFOLD_CACHE_DIR ?? path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'), 'layerfold');
}

// Runs the generator's main(args) in this process. It writes its one line (what it wrote, or
// why it could not) to this process's stderr itself, through NODERAWFS.
async function makeModel(args) {
  const createMakeModel = require(distFile('make_model.js'));
  // The 3.1.6 glue would fetch() the .wasm by path under Node 18+; hand it the bytes.
  const generator = await createMakeModel({ wasmBinary: fs.readFileSync(distFile('make_model.wasm')) });
  // The glue records main's status as the process's exit code: this process's code is its own.
  const exitCode = process.exitCode;
  let status;
  try {
    status = generator.callMain(args);
  } finally {
    process.exitCode = exitCode;
    // Its pthread worker (the generator splits big tensors over two threads) would keep this process alive.
    generator.PThread.terminateAllThreads();
  }
  if (status !== 0) throw new Error(`could not generate the default model: make_model ${args.join(' ')} exited with ${status}`);
}

/**
 * Path of the default model, generated on first use (about a second, 24 MB).
 * @returns {Promise<string>}
 * @example const model = await defaultModel(); // ~/.cache/layerfold/default-gemma-vocab.gguf
 */
export async function defaultModel() {
  const dir = cacheDir();
  const out = path.join(dir, `default-${PRESET}.gguf`);
  if (fs.existsSync(out)) return out;
  fs.mkdirSync(dir, { recursive: true });
  // Temporary names, renamed at the end: a run cut short leaves no half-written model behind,
  // and two first runs at once do not write the same file.
  const unique = `${process.pid}-${Date.now()}`;
  const vocab = path.join(dir, `gemma_tokenizer.${unique}.json`);
  const partial = `${out}.${unique}.tmp`;
  try {
    fs.writeFileSync(vocab, zlib.gunzipSync(fs.readFileSync(distFile('gemma_tokenizer.json.gz'))));
    await makeModel(['--preset', PRESET, '--out', partial, '--tokenizer-json', vocab]);
    fs.renameSync(partial, out);
  } finally {
    fs.rmSync(vocab, { force: true });
    fs.rmSync(partial, { force: true });
  }
  return out;
}
