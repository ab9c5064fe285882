// What the user types in `layerfold chat`, read line by line (node:readline: line editing and
// the up arrow's history on a terminal) into what it means: a command (`/NAME ARGUMENT`), a
// message, or the end (Ctrl-D on an empty line, or the end of a piped input). A message of
// several lines is written between `"""`, as ollama has it: a line starting with `"""` opens it,
// a line ending with `"""` closes it, and the lines between keep their line breaks. Ctrl-C at the
// prompt drops the line and any message under way, as a shell does; during a reply it calls
// the reply's stop instead (whileReplying), so the reply ends and the program goes on.
import readline from 'node:readline';

const PROMPT = '> ';
const MORE_PROMPT = '... ';
const QUOTES = '"""';

// A message, or nothing for one that holds only whitespace.
const message = (text) => (text.trim() === '' ? null : { message: text });

export class ChatInput {
  #rl;
  #lines;
  #output;
  #block = null;  // the lines of a `"""` message under way
  #stop = null;   // the reply's stop while one is written

  /**
   * @example const input = new ChatInput(process.stdin, process.stdout);
   */
  constructor(input, output) {
    this.#output = output;
    this.#rl = readline.createInterface({ input, output, historySize: 100 });
    // Made now: lines the iterator was not there for would be lost.
    this.#lines = this.#rl[Symbol.asyncIterator]();
    this.#rl.on('SIGINT', () => this.#interrupt());
  }

  /**
   * The next thing typed, after a prompt: {message: text} | {command: name, argument: text}, or
   * null at the end of the input (a `"""` message left open there is dropped).
   * @example for (let entry; (entry = await input.next()) !== null;) handle(entry);
   */
  async next() {
    this.#block = null;
    for (;;) {
      this.#rl.setPrompt(this.#block === null ? PROMPT : MORE_PROMPT);
      this.#rl.prompt();
      const { value: line, done } = await this.#lines.next();
      if (done) return null;
      const entry = this.#read(line);
      if (entry) return entry;
    }
  }

  /**
   * fn() with Ctrl-C calling stop() while it runs, not dropping the line.
   * @example await input.whileReplying(() => controller.abort(), () => reply(job));
   */
  async whileReplying(stop, fn) {
    this.#stop = stop;
    try {
      return await fn();
    } finally {
      this.#stop = null;
    }
  }

  /** Stops reading: the terminal is given back as it was. */
  close() {
    this.#rl.close();
  }

  // One line -> what it completes, or null while a message goes on (or for a blank line).
  #read(line) {
    if (this.#block !== null) {
      if (!line.endsWith(QUOTES)) {
        this.#block.push(line);
        return null;
      }
      const last = line.slice(0, -QUOTES.length);
      const text = [...this.#block, ...(last === '' ? [] : [last])].join('\n');
      this.#block = null;
      return message(text);
    }
    if (line.startsWith(QUOTES)) {
      const rest = line.slice(QUOTES.length);
      if (rest.endsWith(QUOTES)) return message(rest.slice(0, -QUOTES.length));
      this.#block = rest === '' ? [] : [rest];
      return null;
    }
    const text = line.trim();
    if (!text.startsWith('/')) return message(text);
    const [, command, argument] = /^\/(\S*)\s*(.*)$/s.exec(text);
    return { command, argument };
  }

  #interrupt() {
    if (this.#stop) {
      this.#stop();
      return;
    }
    const idle = this.#rl.line === '' && this.#block === null;
    this.#block = null;
    // Ctrl-E, Ctrl-U: the cursor to the end of the line, and the line deleted.
    this.#rl.write(null, { ctrl: true, name: 'e' });
    this.#rl.write(null, { ctrl: true, name: 'u' });
    this.#output.write(idle ? '\n(Ctrl-D or /exit leaves)\n' : '\n');
    this.#rl.setPrompt(PROMPT);
    this.#rl.prompt();
  }
}
