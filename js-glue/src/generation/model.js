// A model to chat with, as the library offers it: the generation engine over one open Pipeline
// (local nodes, remote ones or both). chat() and complete() take the fields of OpenAI's request
// bodies and give OpenAI's response objects, whole or as an async iterator of stream chunks; the
// gateway (gateway/app.js) serves exactly these over HTTP. Requests run concurrently
// (coordinator.js); a request whose prompt continues an earlier one's conversation continues
// its session, prefilling only what is new (sessions.js); an AbortSignal stops a request at its
// next step and frees its session on every node.
import { isSynthetic } from '../gguf/header.js';
import { approxModesOn } from '../protocol/approx_options.js';
import { DEFAULT_CHECKPOINTS } from '../protocol/checkpoints.js';
import { stopIds, turnStartIds } from '../tokens/chat.js';
import { Answer } from './answer.js';
import { isObject } from './body_values.js';
import { callConstraints } from './call_constraints.js';
import { chatOutputReader } from './chat_output.js';
import { Coordinator } from './coordinator.js';
import { badParam, toOpenAIError } from './errors.js';
import { chatRequest, checkLogitBias, completionRequest } from './params.js';
import { promptTokens, tokenBudget } from './prompt.js';
import { PromptLookup } from './prompt_lookup.js';
import { Reply } from './reply.js';
import { responseConstraints } from './response_format.js';
import { responseId, ResponseShapes } from './responses.js';
import { Run } from './run.js';
import { SessionCache } from './sessions.js';
import { channelMarkers, choiceOutputs } from './thought_channel.js';

// chat()'s and complete()'s options -> the request body's fields, the signal apart.
function requestFields(options, call) {
  if (!isObject(options)) throw badParam('options', `${call}: the options must be an object of request fields`);
  const { signal, ...fields } = options;
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw badParam('signal', `${call}: signal must be an AbortSignal`);
  if ('model' in fields) throw badParam('model', `${call}: the model is the Model's own; leave model out of the options`);
  return fields;
}

export class Model {
  #lookup;
  #mtp;
  #onClose;

  /**
   * The engine over an open pipeline, which stays the caller's to close. id: the model's name in
   * the answers (default: general.name); maxQueue: requests admitted besides one (a 429
   * OpenAIError beyond it); maxCachedSessions: finished conversations' sessions kept for prefix
   * reuse; speculative: prompt lookup's options ({minNgram, maxNgram, maxDraft}) to decode with
   * drafts, and with mtp: true the MTP drafter's on the pipeline's last node too (at most maxDraft
   * at once; refused when that node has no draft model); encodePrompt(input): tokenizes a prompt elsewhere (the gateway's tokenizer thread);
   * openGrammar(pipeline, endIds): the grammar engine for response_format and enforced tool
   * calls (default none: those are refused with a 400); checkpoints: the checkpoints a chat's
   * session keeps on each node, one where each prompt opens the model's turn (0: none; Run);
   * sessions: which session a request continues (default a SessionCache of maxCachedSessions;
   * `layerfold chat` keeps its one conversation's); media: a MediaInput (media.js: the projector's
   * encoder) to read chats' image parts, which are refused without; onClose: what close() does
   * (openModel: close the pipeline it opened).
   * @example const model = new Model(pipeline, { id: 'tiny' });
   */
  constructor(pipeline, { id = pipeline.header.metadata['general.name'] ?? 'model', maxQueue = 16, maxCachedSessions = 16, speculative = null,
    encodePrompt, openGrammar = null, checkpoints = DEFAULT_CHECKPOINTS, sessions = new SessionCache(maxCachedSessions), media = null,
    onClose = async () => {} } = {}) {
    this.pipeline = pipeline;
    this.id = id;
    this.synthetic = isSynthetic(pipeline.header);
    this.tokenizer = pipeline.tokenizer;
    this.coordinator = new Coordinator(pipeline, { maxWaiting: maxQueue });
    this.sessions = sessions;
    this.endIds = stopIds(pipeline.tokenizer);
    this.markers = channelMarkers(pipeline.tokenizer);
    this.checkpoints = checkpoints;
    this.turnStarts = turnStartIds(pipeline.tokenizer);
    this.grammar = openGrammar ? openGrammar(pipeline, this.endIds) : null;
    // Drafts need cuts, which approximate modes do not allow (early exit keeps no state at a cut)
    // or would make depend on the rows fed.
    const drafting = speculative && !approxModesOn(pipeline.approx);
    this.#lookup = drafting ? new PromptLookup(speculative) : null;
    this.#mtp = drafting && speculative.mtp ? { maxDraft: this.#lookup.maxDraft } : null;
    if (this.#mtp && !pipeline.drafts) {
      throw new Error('speculative mtp: the pipeline\'s last node has no draft model (draftModel, or serve --draft-model on a remote node)');
    }
    this.encodePrompt = encodePrompt;
    this.media = media;
    this.#onClose = onClose;
  }

  /** A request's place in the line (a 429 OpenAIError when it is full); Reply releases it. */
  admit() {
    return this.coordinator.admit();
  }

  /**
   * Starts a checked request (params.js's chatRequest or completionRequest) -> its Reply. ticket:
   * its place in the line (default: taken here); signal: its caller's (the request stops at the
   * next step when it fires); deadlineMs: a deadline (504 beyond); trace, observer: run.js's.
   * @example const reply = await model.start(chatRequest(body), { signal: c.req.raw.signal });
   */
  async start(request, { ticket = this.admit(), signal, deadlineMs, trace = null, observer = {} } = {}) {
    try {
      checkLogitBias(request, this.tokenizer.nVocab);
      const { ids: prompt, items } = await promptTokens(this.pipeline, request, this.encodePrompt, this.media, signal);
      const maxTokens = tokenBudget(this.pipeline, request, prompt.length);
      const constraints = choiceOutputs(this.tokenizer, this.markers, request,
        await callConstraints(this.grammar, request) ?? await responseConstraints(this.grammar, request.responseFormat ?? null, request.n));
      const run = new Run({ coordinator: this.coordinator, sessions: this.sessions, tokenizer: this.tokenizer, endIds: this.endIds, drafter: this.#lookup,
        mtp: this.#mtp, constraints, ticket, request, prompt, items, maxTokens, checkpoint: this.#checkpointOf(request, prompt), deadlineMs, clientSignal: signal, trace, observer });
      const shapes = new ResponseShapes({ id: responseId(request.kind), created: Math.floor(Date.now() / 1000), model: this.id, kind: request.kind },
        (id) => this.tokenizer.decode([id]), request.logprobs);
      return new Reply(run, new Answer(shapes, () => chatOutputReader(request, this.markers !== null), request));
    } catch (error) {
      ticket.release();
      throw error;
    }
  }

  // A chat's checkpoint: where its prompt opens the model's turn. Approximate modes take none
  // (early exit keeps no state at a cut).
  #checkpointOf(request, prompt) {
    if (request.kind !== 'chat' || this.checkpoints === 0 || approxModesOn(this.pipeline.approx)) return null;
    const at = prompt.findLastIndex((id) => this.turnStarts.has(id));
    return at > 0 ? { at, keep: this.checkpoints } : null;
  }

  /**
   * A chat answer to `messages` (OpenAI's chat messages). options: the fields of a
   * /v1/chat/completions body (max_tokens, temperature, top_p, top_k, seed, stop, n, tools,
   * tool_choice, response_format, logprobs, reasoning_effort, …) but model, and `signal`.
   * -> a Promise of the chat.completion object; with stream: true, an async iterable of its
   * chat.completion.chunk objects. A bad field is an OpenAIError naming it (status 400); a
   * fired signal rejects with its reason.
   * @example
   * const answer = await model.chat([{ role: 'user', content: 'Hi' }], { max_tokens: 32 });
   * for await (const chunk of model.chat(messages, { stream: true, signal })) process.stdout.write(chunk.choices[0]?.delta.content ?? '');
   */
  chat(messages, options = {}) {
    return this.#answer(options, 'chat', (fields) => chatRequest({ ...fields, model: this.id, messages }));
  }

  /**
   * A completion of `prompt` (text, llama.cpp's way: BOS added, control tokens parsed; or token
   * ids). options: the fields of a /v1/completions body but model, and `signal`. -> a Promise of
   * the text_completion object, or with stream: true an async iterable of its chunks.
   * @example const { choices } = await model.complete('Once upon a time', { max_tokens: 16, temperature: 0 });
   */
  complete(prompt, options = {}) {
    return this.#answer(options, 'complete', (fields) => completionRequest({ ...fields, model: this.id, prompt }));
  }

  // The request started and answered whole or as chunks. Whatever stops it reaches the caller
  // as an OpenAIError, or, when the caller's signal fired, as the signal's reason.
  #answer(options, call, parse) {
    const signal = options?.signal;
    const failure = (error) => (signal?.aborted ? signal.reason : toOpenAIError(error));
    const start = async () => {
      const fields = requestFields(options, call);
      signal?.throwIfAborted();
      return this.start(parse(fields), { signal });
    };
    if (options?.stream !== true) return start().then((reply) => reply.whole()).catch((error) => Promise.reject(failure(error)));
    return { [Symbol.asyncIterator]: async function* chunks() {
      try {
        yield* (await start()).chunks();
      } catch (error) {
        throw failure(error);
      }
    } };
  }

  /** Ends the model as its maker asked (openModel: closes its pipeline; otherwise nothing). */
  async close() {
    const onClose = this.#onClose;
    this.#onClose = async () => {};
    await onClose();
  }
}
