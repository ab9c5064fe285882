// The synthetic-model generator as the package ships it: the native tool (tools/make_model)
// built as a module (dist/make_model.js, the same command line), run in this process, with the
// Gemma vocabulary it reads from a tokenizer.json packed beside it (dist/gemma_tokenizer.json.gz).
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import zlib from 'node:zlib';

const require = createRequire(import.meta.url);
const distFile = (name) => fileURLToPath(new URL(`../../dist/${name}`, import.meta.url));

/**
 * Runs the generator's main(args) in this process; answers its exit status. It writes its own
 * lines (what it wrote, or why it could not) to this process's stdout and stderr, through
 * NODERAWFS, and paths are this process's.
 * @example const status = await runGenerator(['--preset', 'tiny', '--out', 'tiny.gguf']);
 */
export async function runGenerator(args) {
  const createMakeModel = require(distFile('make_model.js'));
  // The 3.1.6 glue would fetch() the .wasm by path under Node 18+; hand it the bytes.
  const generator = await createMakeModel({ wasmBinary: fs.readFileSync(distFile('make_model.wasm')) });
  // The glue records main's status as the process's exit code: this process's code is its own.
  const exitCode = process.exitCode;
  try {
    return generator.callMain(args);
  } finally {
    process.exitCode = exitCode;
    // Its pthread worker (the generator splits big tensors over two threads) would keep this process alive.
    generator.PThread.terminateAllThreads();
  }
}

/**
 * fn(file) with the packed Gemma tokenizer.json written to a file in `dir` (a name of its own,
 * so runs at once do not share it), removed after.
 * @example await withGemmaTokenizer(os.tmpdir(), (file) => runGenerator(['--tokenizer-json', file, ...args]));
 */
export async function withGemmaTokenizer(dir, fn) {
  const file = path.join(dir, `gemma_tokenizer.${process.pid}-${Date.now()}.json`);
  try {
    fs.writeFileSync(file, zlib.gunzipSync(fs.readFileSync(distFile('gemma_tokenizer.json.gz'))));
    return await fn(file);
  } finally {
    fs.rmSync(file, { force: true });
  }
}
