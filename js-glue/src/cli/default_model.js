// The built-in default model: a synthetic Gemma 4 with the real architecture and the real Gemma
// vocabulary, made once and cached, so `layerfold validate` works with no weights to download.
// The package makes it itself, in this process, with its generator (generator.js): the same code
// path in a checkout and in an installed package.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { runGenerator, withGemmaTokenizer } from './generator.js';

const PRESET = 'gemma-vocab';

/**
 * Where layerfold keeps what it makes or fetches: LAYERFOLD_CACHE_DIR, else
 * $XDG_CACHE_HOME/layerfold, else ~/.cache/layerfold.
 * @example path.join(cacheDir(), 'objects')
 */
export function cacheDir() {
  return process.env.LAYERFOLD_CACHE_DIR ?? path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'), 'layerfold');
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
  const partial = `${out}.${process.pid}-${Date.now()}.tmp`;
  try {
    const status = await withGemmaTokenizer(dir, (vocab) => runGenerator(['--preset', PRESET, '--out', partial, '--tokenizer-json', vocab]));
    if (status !== 0) throw new Error(`could not generate the default model: make_model --preset ${PRESET} exited with ${status}`);
    fs.renameSync(partial, out);
  } finally {
    fs.rmSync(partial, { force: true });
  }
  return out;
}
