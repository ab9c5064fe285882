// The built-in default model: a synthetic Gemma 4 with the real architecture and the real Gemma
// vocabulary, generated once by scripts/make-model and cached, so `layerfold validate` works on
// a fresh machine with no weights to download.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const PRESET = 'gemma-vocab';

export function cacheDir() {
  return process.env.LAYERFOLD_CACHE_DIR ?? path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'), 'layerfold');
}

/** Path of the default model, generating it on first use. */
export function defaultModel() {
  const out = path.join(cacheDir(), `default-${PRESET}.gguf`);
  if (fs.existsSync(out)) return out;
  const makeModel = path.join(repoRoot, 'scripts', 'make-model');
  if (!fs.existsSync(makeModel)) throw new Error('no --model given and no generator to make the default: pass --model');
  fs.mkdirSync(cacheDir(), { recursive: true });
  const r = spawnSync(makeModel, ['--preset', PRESET, '--out', out], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`could not generate the default model: ${r.stderr.trim()}`);
  return out;
}
