// Google's first Gemma 4 chat templates (the one in llama.cpp's Gemma 4 vocabulary file among
// them) render tool results only from an assistant message's `tool_responses`, not from OpenAI's
// `role: "tool"` messages. llama.cpp rewrites the messages for them (common/chat.cpp,
// convert_tool_responses_gemma4), and so does this module, the same way: an assistant message
// with calls, the tool messages after it and the next assistant message's content (when it has
// content and no calls) become one assistant message. Each result is named by its position
// among the calls (not by its tool_call_id), and is the tool message's content parsed as JSON
// when it parses, else that text; the calling message's own content is dropped, as llama.cpp
// drops it.

const hasCalls = (m) => m?.role === 'assistant' && Array.isArray(m.tool_calls) && m.tool_calls.length > 0;

// The result of tool message m (messages[at]) answering call number `index` of `calls`:
// {name, response, at}.
function toolResponse(m, at, index, calls) {
  let response = m.content ?? null;
  if (typeof response === 'string') {
    try {
      response = JSON.parse(response);
    } catch {
      // Not JSON: the text itself, as llama.cpp keeps it.
    }
  }
  const name = calls[index]?.function?.name || m.tool_call_id || '';
  return { name, response, at };
}

/**
 * True for a Gemma 4 chat template, known as llama.cpp knows it: by its call syntax.
 * @example isGemma4(header.metadata['tokenizer.chat_template'])
 */
export const isGemma4 = (source) => source.includes("'<|tool_call>call:'");

/**
 * True for a Gemma 4 template written before Google's templates took OpenAI's tool messages, the
 * test llama.cpp applies.
 * @example wantsToolResponses(header.metadata['tokenizer.chat_template'])
 */
export function wantsToolResponses(source) {
  return isGemma4(source) && !source.includes('{#- OpenAI Chat Completions:');
}

/**
 * Checked chat messages -> the same with each tool round folded into one assistant message
 * {role: 'assistant', tool_calls, tool_responses?, content?, reasoning_content?}; each message
 * and result carries `at`, its index in `messages`, for errors to name it.
 * @example foldToolResponses([ask, { role: 'assistant', content: null, tool_calls }, { role: 'tool', tool_call_id: 'c1', content: '{"t": 21}' }])
 */
export function foldToolResponses(messages) {
  const out = [];
  for (let i = 0; i < messages.length;) {
    const at = i;
    const m = messages[i++];
    if (!hasCalls(m)) {
      out.push({ ...m, at });
      continue;
    }
    const folded = { role: 'assistant', tool_calls: m.tool_calls, at };
    const responses = [];
    while (i < messages.length && messages[i].role === 'tool') {
      responses.push(toolResponse(messages[i], i, responses.length, m.tool_calls));
      i++;
    }
    if (responses.length > 0) folded.tool_responses = responses;
    const next = messages[i];
    if (next?.role === 'assistant' && !hasCalls(next) && next.content) {
      folded.content = next.content;
      i++;
    }
    if (typeof m.reasoning_content === 'string') folded.reasoning_content = m.reasoning_content;
    out.push(folded);
  }
  return out;
}
