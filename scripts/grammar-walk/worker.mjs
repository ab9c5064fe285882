// walk.mjs's walk inside workerd, for scripts/bench-grammar: a worker that opens the
// grammar engine as the gateway worker does (the bundle's XGrammar, the tokenizer of the GGUF at
// VOCAB_KEY in the R2 binding VOCAB, in the single-thread wasm32-wasi module) and answers
// GET /?tokens=N with the walk's rows as JSON.
import xgrammar from '@mlc-ai/web-xgrammar';
import wasm from '../../js-glue/dist/layerfold_wasi.wasm';
import { openModelHeader } from '../../js-glue/src/gguf/header.js';
import { R2BindingSource } from '../../js-glue/src/sources/r2_binding.js';
import { stopIds } from '../../js-glue/src/tokens/chat.js';
import { GrammarEngine } from '../../js-glue/src/tokens/grammar/engine.js';
import { Tokenizer } from '../../js-glue/src/tokens/tokenizer.js';
import { instantiateSingleThreadModule } from '../../js-glue/src/wasm/wasi.js';
import { grammarWalk } from './walk.mjs';

async function openTokenizer(bucket, key) {
  const lf = await instantiateSingleThreadModule(wasm);
  const source = await R2BindingSource.open(bucket, key);
  try {
    const { gguf } = await openModelHeader(lf, source);
    try {
      return Tokenizer.fromGguf(lf, gguf);
    } finally {
      lf.fn.lf_gguf_free(gguf);
    }
  } finally {
    await source.close();
  }
}

export default {
  async fetch(request, env) {
    const tokens = Number(new URL(request.url).searchParams.get('tokens') ?? 400);
    const tokenizer = await openTokenizer(env.VOCAB, env.VOCAB_KEY);
    try {
      const engine = new GrammarEngine(async () => xgrammar, tokenizer, stopIds(tokenizer));
      const rows = await grammarWalk({ engine, nVocab: tokenizer.nVocab, ends: stopIds(tokenizer), tokens, now: () => performance.now() });
      return Response.json(rows);
    } finally {
      tokenizer.close();
    }
  },
};
