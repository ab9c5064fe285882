// The OpenAI response objects, whole and as stream chunks, for chat (chat.completion,
// chat.completion.chunk) and legacy completions (text_completion), with usage and logprobs in
// the shapes OpenAI documents, so the official clients' types parse them unchanged; a chat
// message may carry reasoning_content (as llama.cpp's server and vLLM send a model's thoughts)
// and tool_calls.

const utf8 = new TextEncoder();

/** An id in OpenAI's style: chatcmpl-… or cmpl-…. */
export function responseId(kind) {
  return `${kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${crypto.randomUUID().replaceAll('-', '')}`;
}

/**
 * usage: {prompt_tokens, completion_tokens, total_tokens, prompt_tokens_details: {cached_tokens},
 * completion_tokens_details: {accepted_prediction_tokens, rejected_prediction_tokens}}: the
 * prediction counts, OpenAI's for predicted outputs, here count the tokens prompt lookup drafted.
 */
export function usage({ promptTokens, completionTokens, cachedTokens, acceptedDrafts = 0, rejectedDrafts = 0 }) {
  return {
    prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens,
    prompt_tokens_details: { cached_tokens: cachedTokens },
    completion_tokens_details: { accepted_prediction_tokens: acceptedDrafts, rejected_prediction_tokens: rejectedDrafts },
  };
}

// Token entries of chat logprobs: {token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}.
function chatLogprobs(tokens, pieceOf) {
  const entry = ({ id, logprob }) => {
    const token = pieceOf(id);
    return { token, logprob, bytes: [...utf8.encode(token)] };
  };
  return { content: tokens.map((t) => ({ ...entry(t), top_logprobs: t.top.map(entry) })), refusal: null };
}

// Legacy completions logprobs: parallel arrays, top alternatives as {token: logprob} maps.
function completionLogprobs(tokens, pieceOf, textOffset) {
  const out = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
  let offset = textOffset;
  for (const t of tokens) {
    const piece = pieceOf(t.id);
    out.tokens.push(piece);
    out.token_logprobs.push(t.logprob);
    out.top_logprobs.push(Object.fromEntries(t.top.map((a) => [pieceOf(a.id), a.logprob])));
    out.text_offset.push(offset);
    offset += piece.length;
  }
  return out;
}

// The assistant message of a read answer ({content, reasoning_content, tool_calls}): content is
// null beside calls and nothing else, as OpenAI sends it; empty fields are left out.
function assistantMessage({ content, reasoning_content: reasoning, tool_calls: calls }) {
  return {
    role: 'assistant',
    content: content === '' && calls.length > 0 ? null : content,
    ...(reasoning !== '' && { reasoning_content: reasoning }),
    ...(calls.length > 0 && { tool_calls: calls }),
    refusal: null,
  };
}

/**
 * The stream deltas of one of a reader's deltas (chat/gemma4_output.js): text as content or
 * reasoning_content; a call as OpenAI streams one, its index, id, type and name with empty
 * arguments first, then its arguments.
 * @example streamDeltas({ tool_call: { index: 0, id: 'call_1', name: 'f', arguments: '{}' } })
 */
export function streamDeltas(delta) {
  if (!delta.tool_call) return [delta];
  const { index, id, name, arguments: args } = delta.tool_call;
  return [
    { tool_calls: [{ index, id, type: 'function', function: { name, arguments: '' } }] },
    { tool_calls: [{ index, function: { arguments: args } }] },
  ];
}

/**
 * Builds one request's response objects. head: {id, created, model, kind}; pieceOf(id): a
 * token's text; logprobs: whether the request asked for them.
 * @example const r = new ResponseShapes({ id, created, model, kind: 'chat' }, (id) => tok.decode([id]), false);
 */
export class ResponseShapes {
  constructor(head, pieceOf, logprobs) {
    this.head = head;
    this.pieceOf = pieceOf;
    this.logprobs = logprobs;
    this.offsets = [];  // text_offset of each choice's next completion token
  }

  #logprobs(tokens, index) {
    if (!this.logprobs) return null;
    if (this.head.kind === 'chat') return chatLogprobs(tokens, this.pieceOf);
    const out = completionLogprobs(tokens, this.pieceOf, this.offsets[index] ?? 0);
    this.offsets[index] = (this.offsets[index] ?? 0) + tokens.reduce((n, t) => n + this.pieceOf(t.id).length, 0);
    return out;
  }

  #top(object) {
    const { id, created, model } = this.head;
    return { id, object, created, model };
  }

  /**
   * The whole answer (stream: false): choices [{text, message, tokens, finishReason}] in index
   * order, a chat choice's message the one a reader made of its text (null: the text as content).
   */
  complete({ choices, usage: u }) {
    if (this.head.kind === 'chat') {
      return {
        ...this.#top('chat.completion'),
        choices: choices.map(({ text, message, tokens, finishReason }, index) => ({
          index,
          message: message ? assistantMessage(message) : { role: 'assistant', content: text, refusal: null },
          logprobs: this.#logprobs(tokens, index),
          finish_reason: finishReason,
        })),
        usage: u,
      };
    }
    return {
      ...this.#top('text_completion'),
      choices: choices.map(({ text, tokens, finishReason }, index) => ({ text, index, logprobs: this.#logprobs(tokens, index), finish_reason: finishReason })),
      usage: u,
    };
  }

  /**
   * A stream chunk of choice `index`: the first ({first: true}: the assistant role, empty content), a delta of
   * text (or for chat a delta of streamDeltas) with its tokens' logprobs, or the last
   * ({finishReason}). withUsage adds usage: null, as OpenAI does on every chunk before the usage
   * chunk when stream_options.include_usage is set.
   */
  chunk({ index = 0, first = false, text = '', delta = null, tokens = [], finishReason = null }, withUsage) {
    const tail = withUsage ? { usage: null } : {};
    if (this.head.kind === 'chat') {
      const d = first ? { role: 'assistant', content: '', refusal: null } : finishReason ? {} : delta ?? { content: text };
      const logprobs = finishReason || first ? null : this.#logprobs(tokens, index);
      return { ...this.#top('chat.completion.chunk'), choices: [{ index, delta: d, logprobs, finish_reason: finishReason }], ...tail };
    }
    return { ...this.#top('text_completion'), choices: [{ text, index, logprobs: finishReason ? null : this.#logprobs(tokens, index), finish_reason: finishReason }], ...tail };
  }

  /** The last chunk when include_usage is set: no choices, the request's usage. */
  usageChunk(u) {
    return { ...this.#top(this.head.kind === 'chat' ? 'chat.completion.chunk' : 'text_completion'), choices: [], usage: u };
  }
}
