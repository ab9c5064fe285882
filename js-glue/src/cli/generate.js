// layerfold generate: stream a continuation through the pipeline, greedy or sampled, optionally
// with the model's own chat template (tokenizer.chat_template, rendered by @huggingface/jinja).
import { defaultModel } from './default_model.js';
import { openPipeline } from './open_pipeline.js';
import { chatTokens, stopIds } from '../tokens/chat.js';
import { Sampler } from '../tokens/sampler.js';

function promptTokens(pipeline, options) {
  const { tokenizer } = pipeline;
  if (!options.chat) return tokenizer.encode(options.prompt, { addBos: true });
  try {
    return chatTokens(pipeline.header, tokenizer, [{ role: 'user', content: options.prompt }]);
  } catch (error) {
    throw new Error(`--chat: ${error.message}`);
  }
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
