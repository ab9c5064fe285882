// The library's way to a Model in Node: the pipeline opened (Pipeline.open: local nodes, remote
// ones or both) and the grammar engine on a worker thread of its own, so a schema's compile
// never stalls the caller's event loop; the model's close() closes both.
import { Pipeline } from '../pipeline/pipeline.js';
import { GrammarThread } from './grammar_thread.js';
import { Model } from './model.js';

/**
 * options: Pipeline.open's (draftModel too: the MTP drafter beside a local last node), and the
 * Model's (id, maxQueue, maxCachedSessions, speculative: {mtp: true} drafts with it).
 * @example
 * const model = await openModel({ model: 'gemma.gguf' });
 * const answer = await model.chat([{ role: 'user', content: 'Hi' }], { max_tokens: 32 });
 * await model.close();
 */
export async function openModel({ id, maxQueue, maxCachedSessions, speculative, ...pipelineOptions }) {
  const pipeline = await Pipeline.open(pipelineOptions);
  const grammar = new GrammarThread(pipeline.header, pipeline.tokenizer.nVocab);
  return new Model(pipeline, {
    id, maxQueue, maxCachedSessions, speculative,
    openGrammar: () => grammar,
    onClose: async () => {
      await grammar.close();
      await pipeline.close();
    },
  });
}
