// One reply of `layerfold chat`, generated as the gateway generates a chat answer: the prompt
// run by generation/run.js (the kept session continued past the prefix it shares with the prompt,
// tokens sampled until an end-of-turn token or the budget) and its text read by the gateway's
// chat reader (generation/chat_output.js: Gemma 4's thought channel apart from the content). The
// text is written as it comes, thoughts through dim(); only the content is the reply the
// conversation keeps, as the template keeps no thought. A signal that fires (Ctrl-C) ends the
// reply at its next step: the content written so far is the reply.
import { chatOutputReader } from '../generation/chat_output.js';
import { Run } from '../generation/run.js';
import { timings } from '../generation/timings.js';

/**
 * -> {content, stopped: whether the signal ended it, timings: llama.cpp's (generation/timings.js),
 * null for a stopped reply}.
 * job: {coordinator (generation/coordinator.js), sessions (chat_session.js), tokenizer, endIds,
 * gemma4: whether the model writes Gemma 4's output format, prompt, request: {n: 1, sampling,
 * stop, logprobs: false}, maxTokens, signal}.
 * @example const { content } = await reply(job, { write: (s) => process.stdout.write(s), dim: (s) => s });
 */
export async function reply({ gemma4, signal, ...job }, { write, dim }) {
  const reader = chatOutputReader({ kind: 'chat' }, gemma4);
  let content = '';
  const show = (deltas) => {
    for (const delta of deltas) {
      if (delta.reasoning_content) write(dim(delta.reasoning_content));
      if (delta.content) {
        content += delta.content;
        write(delta.content);
      }
    }
  };
  const run = new Run({ ...job, ticket: job.coordinator.admit(), clientSignal: signal });
  let result = null;
  try {
    for (;;) {
      const { value, done } = await run.events.next();
      if (done) {
        result = value;
        break;
      }
      if (value.text) show(reader ? reader.push(value.text) : [{ content: value.text }]);
    }
  } catch (error) {
    if (!signal.aborted) throw error;
  }
  if (reader) show(reader.end());
  return { content, stopped: result === null, timings: result && timings(result.timings) };
}
