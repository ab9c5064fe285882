// walk.mjs's walk inside workerd, for scripts/bench-grammar: a worker that opens the
// grammar engine as the gateway worker does (the bundle's XGrammar, the tokenizer of the GGUF at
// VOCAB_KEY in the R2 binding VOCAB, in the single-thread wasm32-wasi module) and answers
// GET /?tokens=N with the walk's rows as JSON.
import xgrammar from '@mlc-ai/web-xgrammar';
import wasm from '../../js-glue/dist/layerfold_wasi.wasm';
import { readEdgeModel } from '../../js-glue/edge/edge_gateway.js';
import { stopIds } from '../../js-glue/src/tokens/chat.js';
import { GrammarEngine } from '../../js-glue/src/tokens/grammar/engine.js';
import { grammarWalk } from './walk.mjs';

export default {
  async fetch(request, env) {
    const tokens = Number(new URL(request.url).searchParams.get('tokens') ?? 400);
    const { tokenizer } = await readEdgeModel(wasm, env.VOCAB, env.VOCAB_KEY);
    try {
      const ends = stopIds(tokenizer);
      const engine = new GrammarEngine(async () => xgrammar, tokenizer, ends);
      const rows = await grammarWalk({ engine, nVocab: tokenizer.nVocab, ends, tokens, now: () => performance.now() });
      return Response.json(rows);
    } finally {
      tokenizer.close();
    }
  },
};
