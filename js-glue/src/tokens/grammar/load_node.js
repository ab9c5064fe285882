// XGrammar's module in Node. The package's one file is a UMD script inside a package marked as
// ES modules, and Node refuses to run it as one (its Emscripten loader reaches for `require` and
// `__filename`): it is compiled here as the CommonJS script it is, and each call gives a fresh
// copy, whose WebAssembly instance shares nothing with an earlier copy that aborted.
import fs from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const requireFromString = require('require-from-string');

/**
 * A new XGrammar namespace ({Grammar, GrammarCompiler, GrammarMatcher, TokenizerInfo, ...}).
 * @example const xg = await loadXGrammar();
 */
export async function loadXGrammar() {
  const file = require.resolve('@mlc-ai/web-xgrammar');
  return requireFromString(await fs.promises.readFile(file, 'utf8'), file);
}
