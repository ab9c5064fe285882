// layerfold make-model: a synthetic Gemma GGUF (the real architecture and shapes, deterministic
// pseudo-random weights) from the package's generator, as the repository's scripts/make-model
// makes it: the same presets, options and bytes. Its arguments are the generator's own, which
// checks them and prints its options with --help; the Gemma vocabulary (--vocab gemma, preset
// gemma-vocab) comes from the package, as scripts/make-model gives the repository's.
import os from 'node:os';

import { runGenerator, withGemmaTokenizer } from './generator.js';

/** Runs the generator with `args`; its exit status is the command's. */
export async function makeModel(args) {
  // A --tokenizer-json of the caller's comes later and wins.
  return withGemmaTokenizer(os.tmpdir(), (vocab) => runGenerator(['--tokenizer-json', vocab, ...args]));
}
