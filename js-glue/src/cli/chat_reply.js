// One reply of `layerfold chat`, asked of the library's Model as any program asks it
// (generation/model.js: the kept session continued past the prefix it shares with the prompt,
// tokens sampled until an end-of-turn token or the budget, Gemma 4's thought channel apart from
// the content) and streamed. The text is written as it comes, thoughts through dim(); only the
// content is the reply the conversation keeps, as the template keeps no thought. A signal that
// fires (Ctrl-C) ends the reply at its next step: the content written so far is the reply.

/**
 * -> {content, stopped: whether the signal ended it, timings: llama.cpp's (null for a stopped
 * reply)}, or {refusal} when the conversation cannot go on as it is (the template cannot render
 * it, it fills the model's context). fields: chat()'s request fields.
 * @example const { content } = await reply(model, messages, { max_tokens: 64, signal }, { write: (s) => process.stdout.write(s), dim: (s) => s });
 */
export async function reply(model, messages, fields, { write, dim }) {
  let content = '';
  let timings = null;
  try {
    for await (const chunk of model.chat(messages, { ...fields, stream: true })) {
      const delta = chunk.choices[0]?.delta ?? {};
      if (delta.reasoning_content) write(dim(delta.reasoning_content));
      if (delta.content) {
        content += delta.content;
        write(delta.content);
      }
      timings = chunk.timings ?? timings;
    }
  } catch (error) {
    if (fields.signal.aborted) return { content, stopped: true, timings: null };
    if (error.status === 400) return { refusal: error.code === 'context_length_exceeded' ? `${error.message}; /reset starts the conversation over` : error.message };
    throw error;
  }
  return { content, stopped: false, timings };
}
