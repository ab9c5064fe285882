// How a user of the package writes against it; must type-check with --strict.
import { LayerNode, LayerfoldError, Model, OpenAIError, Pipeline, Tokenizer, createGatewayApp, openModel, openSource, readModelHeader, serveGateway, topK, logSoftmax } from 'layerfold';
import type { AbortSignalLike, ChatCompletion, ChatMessage, LayerNodeInfo, ModelHeader, Progress, Timings } from 'layerfold';
import { openEdgeNode } from 'layerfold/edge';

export async function example(signal: AbortSignalLike): Promise<number> {
  const onProgress = (p: Progress): void => { void p.etaSeconds; };
  const node: LayerNode = await LayerNode.open({ model: 'r2://models/gemma.gguf', layers: [0, 30], threads: 4, cacheDir: '/tmp/lf', onProgress, maxSessions: 8 });
  const tokenizer: Tokenizer | null = node.tokenizer;
  const tokens = tokenizer ? tokenizer.encode('The capital of France is', { addBos: true }) : [2];
  const hidden: Float32Array = await node.forward({ session: 'a', startPos: 0, hidden: node.embed(tokens), lastOnly: true });
  const info: LayerNodeInfo = node.info();
  const best: number = topK(logSoftmax(node.logits(hidden)), 1)[0];
  node.dropSession('a');
  node.close();
  const pipeline = await Pipeline.open({ model: 'model.gguf', nodes: 'local:0-1,local:2-3' });
  const { logits, timings } = await pipeline.step('s', pipeline.tokenizer.encode('hi'));
  pipeline.close();
  const gateway = await serveGateway({ model: 'model.gguf', nodes: 'local:0-1,http://127.0.0.1:8080', modelId: 'gemma', port: 0, maxCachedSessions: 4 });
  const open: Pipeline = await gateway.opened;
  void createGatewayApp({ state: gateway.state, modelId: 'gemma', observer: { firstToken: (ms: number) => { void ms; } } }).fetch;
  await gateway.shutdown();
  void open;
  const header: ModelHeader = await readModelHeader('model.gguf');
  const second = await LayerNode.open({ model: 'model.gguf', header, layers: [header.info.n_layer - 1, header.info.n_layer] });
  second.close();
  const edge: LayerNode = await openEdgeNode({ module: {}, bucket: { head: async () => null, get: async () => null }, key: 'm.gguf', layers: [0, 1] });
  edge.close();
  const source = await openSource({ bucket: { head: async () => null, get: async () => null }, key: 'm.gguf' }, { retries: 3 });
  await source.close();
  const model = await openModel({ model: 'model.gguf', nodes: 'local:0-1', maxCachedSessions: 4 });
  const messages: ChatMessage[] = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }];
  const answer: ChatCompletion = await model.chat(messages, { max_tokens: 32, temperature: 0.7, seed: 1, stop: ['\n'] });
  const calls = answer.choices[0].message.tool_calls ?? [];
  let text = '';
  try {
    for await (const chunk of model.chat([...messages, { role: 'assistant', content: answer.choices[0].message.content, tool_calls: calls }, { role: 'user', content: 'More' }],
      { stream: true, signal, response_format: { type: 'json_object' } })) {
      text += chunk.choices[0]?.delta.content ?? '';
      const t: Timings | undefined = chunk.timings;
      void t;
    }
  } catch (error) {
    if (error instanceof OpenAIError && error.status === 400) text = error.param ?? '';
  }
  for await (const chunk of model.complete([2, 651], { stream: true, max_tokens: 4 })) text += chunk.choices[0].text;
  const borrowed = new Model(pipeline, { id: 'gemma' });
  text += (await borrowed.complete('Once', { logprobs: 2 })).choices[0].text;
  await model.close();
  try {
    await node.forward({ session: 'b', startPos: 3, hidden });
  } catch (error) {
    if (error instanceof LayerfoldError && error.code === 'evicted') return -1;
  }
  return best + info.kvBytes + logits.length + timings[0].layerMs.length + text.length;
}
