// layerfold chat: an interactive chat on the model (or a pipeline of nodes) in the terminal, as
// `ollama run` and `llama-cli -cnv` have it. Each turn renders the whole conversation with the
// model's chat template (tokens/chat.js, as `generate --chat` and the gateway do) and continues
// the session of the turn before from the prefix the two share (chat_session.js), so only the
// new turn's tokens are prefilled; the reply is asked of the library's Model, as the gateway's
// are (chat_reply.js), and streamed as it comes. What is typed is read by chat_input.js: messages
// (several lines between `"""`), commands (/help lists them), Ctrl-C to stop a reply, Ctrl-D to leave.
import { styleText } from 'node:util';

import { ChatInput } from './chat_input.js';
import { reply } from './chat_reply.js';
import { ChatSession } from './chat_session.js';
import { defaultModel } from './default_model.js';
import { openPipeline } from './open_pipeline.js';
import { didYouMean } from './options/did_you_mean.js';
import { MODEL, PIPELINE_OPTIONS, SAMPLING_OPTIONS } from './options/shared.js';
import { noteSynthetic } from './synthetic_note.js';
import { timingsReport } from './timings_report.js';
import { Model } from '../generation/model.js';

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
  const sessions = new ChatSession();
  const model = new Model(pipeline, { sessions });
  const fields = {
    max_tokens: options['max-tokens'], temperature: options.temperature, top_k: options['top-k'], top_p: options['top-p'], seed: options.seed,
    chat_template_kwargs: { enable_thinking: options.think === true },
  };
  const dim = output.isTTY ? (text) => styleText('dim', text) : (text) => text;
  const state = { system: options.system ?? '', turns: [], forget: () => sessions.forget((session) => pipeline.dropSession(session)) };
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
      const stop = new AbortController();
      const answer = await input.whileReplying(() => stop.abort(), () => reply(model, messages, { ...fields, signal: stop.signal }, { write, dim }));
      if (answer.refusal) {
        write(`${answer.refusal}\n`);
        continue;
      }
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
