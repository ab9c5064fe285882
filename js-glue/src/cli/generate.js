// layerfold generate: stream a continuation through the pipeline, greedy or sampled, optionally
// with the model's own chat template (tokenizer.chat_template, rendered by @huggingface/jinja).
import { Template } from '@huggingface/jinja';

import { defaultModel } from './default_model.js';
import { openPipeline } from './open_pipeline.js';
import { Sampler } from '../tokens/sampler.js';

// End-of-generation ids: EOS plus the end-of-turn control tokens the vocabulary has.
function stopIds(tokenizer) {
  const ids = new Set([tokenizer.eos]);
  for (const text of ['<turn|>', '<end_of_turn>']) {
    const encoded = tokenizer.encode(text, { addBos: false, parseSpecial: true });
    if (encoded.length === 1 && tokenizer.piece(encoded[0]) === text) ids.add(encoded[0]);
  }
  return ids;
}

function promptTokens(pipeline, options) {
  const { tokenizer } = pipeline;
  if (!options.chat) return tokenizer.encode(options.prompt, { addBos: true });
  const source = pipeline.header.metadata['tokenizer.chat_template'];
  if (typeof source !== 'string') throw new Error('--chat: the model has no tokenizer.chat_template');
  const text = new Template(source).render({
    messages: [{ role: 'user', content: options.prompt }],
    add_generation_prompt: true,
    bos_token: tokenizer.piece(tokenizer.bos),
    eos_token: tokenizer.piece(tokenizer.eos),
  });
  // The template writes its own BOS and turn markers: parse them as special tokens.
  const bos = tokenizer.piece(tokenizer.bos);
  return tokenizer.encode(text, { addBos: !text.startsWith(bos), parseSpecial: true });
}

export async function generate(options, _positionals, { write = (s) => process.stdout.write(s) } = {}) {
  const model = options.model ?? await defaultModel();
  const pipeline = await openPipeline(model, options);
  try {
    const sampler = new Sampler({ temperature: Number(options.temperature), topK: Number(options['top-k']), topP: Number(options['top-p']), seed: Number(options.seed) });
    const stops = stopIds(pipeline.tokenizer);
    const generated = [];
    let printed = '';
    let input = promptTokens(pipeline, options);
    for (let i = 0; i < Number(options['max-tokens']); i++) {
      const { logits } = await pipeline.step('generate', input);
      const id = sampler.sample(logits);
      if (stops.has(id)) break;
      generated.push(id);
      // Decode the whole continuation each time: a multi-byte character may span tokens.
      const text = pipeline.tokenizer.decode(generated);
      write(text.slice(printed.length));
      printed = text;
      input = [id];
    }
    write('\n');
    if (options.json) console.log(JSON.stringify({ tokens: generated, text: printed }));
    return 0;
  } finally {
    await pipeline.close();
  }
}
