// layerfold chat: an interactive chat on the model (or a pipeline of nodes) in the terminal, as
// `ollama run` and `llama-cli -cnv` have it. Each turn renders the whole conversation with the
// model's chat template (tokens/chat.js, as `generate --chat` and the gateway do) and continues
// the session of the turn before from the prefix the two share (chat_session.js), so only the
// new turn's tokens are prefilled; the reply is generated and read as the gateway's
// (chat_reply.js) and streamed as it comes. What is typed is read by chat_input.js: messages
// (several lines between `"""`), commands (/help lists them), Ctrl-C to stop a reply, Ctrl-D to leave.
import { styleText } from 'node:util';

import { ChatInput } from './chat_input.js';
import { reply } from './chat_reply.js';
import { ChatSession } from './chat_session.js';
import { defaultModel } from './default_model.js';
import { openPipeline } from './open_pipeline.js';
import { didYouMean } from './options/did_you_mean.js';
import { MODEL, PIPELINE_OPTIONS, SAMPLING_OPTIONS, samplingOf } from './options/shared.js';
import { noteSynthetic } from './synthetic_note.js';
import { timingsReport } from './timings_report.js';
import { Coordinator } from '../generation/coordinator.js';
import { tokenBudget } from '../generation/prompt.js';
import { channelMarkers } from '../generation/thought_channel.js';
import { chatTokens, stopIds } from '../tokens/chat.js';

// A terminal chat prints text, never JSON.
const { json: _json, ...PIPELINE } = PIPELINE_OPTIONS;

export const CHAT_OPTIONS = {
  model: MODEL,
  system: { kind: 'string', value: 'TEXT', help: 'the system message (/system changes it)', shown: 'none' },
  think: { kind: 'boolean', help: 'turn the template\'s thinking switch on (Gemma 4\'s thoughts are shown dimmed, never kept)' },
  'max-tokens': { kind: 'integer', min: 1, value: 'N', help: 'tokens to generate per reply', shown: 'what the model\'s context leaves' },
  ...SAMPLING_OPTIONS,
  verbose: { kind: 'boolean', help: 'each reply\'s timings, the prompt\'s tokens the kept session held among them' },
  ...PIPELINE,
};

const HELP = `commands:
  /help          this list
  /reset         start the conversation over
  /system TEXT   set the system message (no TEXT: none) and start over
  /exit          leave (as Ctrl-D does)
a message of several lines goes between """ and """; Ctrl-C stops a reply
`;
const COMMANDS = ['help', 'reset', 'system', 'exit'];

/**
 * The chat, on stdin and stdout until Ctrl-D or /exit -> 0.
 * @example await chat(readOptions(CHAT_OPTIONS, { model: 'gemma.gguf' }))
 */
export async function chat(options, _positionals, { input = process.stdin, output = process.stdout } = {}) {
  const model = options.model ?? await defaultModel();
  const pipeline = await openPipeline(model, options);
  try {
    if (typeof pipeline.header.metadata['tokenizer.chat_template'] !== 'string') {
      throw new Error(`${model} has no chat template (tokenizer.chat_template) to render a conversation with; generate continues plain text`);
    }
    noteSynthetic(pipeline.header);
    await converse(pipeline, options, new ChatInput(input, output), output);
    return 0;
  } finally {
    await pipeline.close();
  }
}

// The conversation: what is typed, read and answered, until the input ends or /exit.
async function converse(pipeline, options, input, output) {
  const write = (text) => output.write(text);
  const job = {
    coordinator: new Coordinator(pipeline),
    sessions: new ChatSession(),
    tokenizer: pipeline.tokenizer,
    endIds: stopIds(pipeline.tokenizer),
    gemma4: channelMarkers(pipeline.tokenizer) !== null,
    request: { n: 1, sampling: samplingOf(options), stop: [], logprobs: false },
  };
  const dim = output.isTTY ? (text) => styleText('dim', text) : (text) => text;
  const state = { system: options.system ?? '', turns: [], forget: () => job.sessions.forget((session) => pipeline.dropSession(session)) };
  write('(/help lists the commands; Ctrl-D or /exit leaves)\n');
  try {
    for (;;) {
      const entry = await input.next();
      // Ctrl-D leaves the cursor after the prompt: the shell's prompt comes on a line of its own.
      if (entry === null) {
        write('\n');
        break;
      }
      if (entry.message === undefined) {
        if (entry.command === 'exit') break;
        await command(entry, state, write);
        continue;
      }
      const messages = [...(state.system === '' ? [] : [{ role: 'system', content: state.system }]), ...state.turns, { role: 'user', content: entry.message }];
      const turn = turnPrompt(pipeline, messages, options);
      if (turn.refusal) {
        write(`${turn.refusal}\n`);
        continue;
      }
      const stop = new AbortController();
      const answer = await input.whileReplying(() => stop.abort(), () =>
        reply({ ...job, ...turn, signal: stop.signal }, { write, dim }));
      state.turns.push({ role: 'user', content: entry.message }, { role: 'assistant', content: answer.content });
      write(answer.stopped ? '\n(stopped)\n' : '\n');
      if (options.verbose && answer.timings) write(timingsReport(answer.timings));
    }
  } finally {
    input.close();
  }
}

// /help, /reset, /system TEXT, or the words for a command there is not.
async function command({ command: name, argument }, state, write) {
  if (name === 'help') {
    write(HELP);
  } else if (name === 'reset' || name === 'system') {
    if (name === 'system') state.system = argument;
    state.turns = [];
    await state.forget();
    write(name === 'reset' ? '(the conversation starts over)\n'
      : `(${state.system === '' ? 'no system message' : 'system message set'}; the conversation starts over)\n`);
  } else {
    const near = didYouMean(name, COMMANDS);
    write(`unknown command /${name}${near ? ` (did you mean /${near}?)` : ''}; /help lists the commands\n`);
  }
}

// The turn's prompt (the conversation with the model's turn opened) and the tokens its reply
// may take, or the refusal that says why the conversation cannot go on as it is.
function turnPrompt(pipeline, messages, options) {
  let prompt;
  try {
    prompt = chatTokens(pipeline.header, pipeline.tokenizer, messages, { enableThinking: options.think });
  } catch (error) {
    return { refusal: `the chat template cannot render this conversation: ${error.message}` };
  }
  try {
    return { prompt, maxTokens: tokenBudget(pipeline, { maxTokens: options['max-tokens'] }, prompt.length) };
  } catch (error) {
    return { refusal: `${error.message}: /reset starts the conversation over` };
  }
}
