// A program run on a pseudo-terminal as a user runs it in one, through util-linux script(1)
// (on every Debian; no native add-on): keys are sent to the terminal, and what the program
// writes there is read back as the screen's text (screenText), to wait on with expect().
import {spawn} from "node:child_process";

// The terminal's output as a screen shows it, for text written line by line: a carriage return
// or a move to a column puts the cursor there, what follows overwrites the line from it, a clear
// (readline redrawing its line) ends the line at the cursor; colours show nothing. The terminal
// sends a newline as \r\n; a character counts one column (enough for lines that are redrawn).
function screenText(raw) {
  const lines = [];
  let line = [];
  let column = 0;
  for (const [piece, parameter, final] of raw.matchAll(/\x1b\[([0-9;?]*)([A-Za-z])|\n|\r|[^\x1b\r\n]+|[\s\S]/g)) {
    if (piece === "\n") {
      lines.push(line.join(""));
      [line, column] = [[], 0];
    } else if (piece === "\r") {
      column = 0;
    } else if (final === "G") {
      column = Number(parameter || 1) - 1;
    } else if (final === "J" || final === "K") {
      line.length = Math.min(line.length, column);
    } else if (final === undefined) {
      for (const char of piece) line[column++] = char;
    }
  }
  return [...lines, line.join("")].join("\n");
}

const quoted = (arg) => `'${arg.replaceAll("'", "'\\''")}'`;

export class PtySession {
  #raw = "";
  #waiters = new Set();

  /**
   * @example const pty = new PtySession(process.execPath, [cli, "chat", "--model", file]);
   */
  constructor(program, args) {
    this.child = spawn("script", ["-qec", [program, ...args].map(quoted).join(" "), "/dev/null"], {stdio: ["pipe", "pipe", "pipe"]});
    this.child.stdout.setEncoding("utf8");
    this.child.stdout.on("data", (text) => {
      this.#raw += text;
      for (const waiter of this.#waiters) waiter();
    });
    this.exited = new Promise((resolve) => this.child.on("exit", (status) => {
      for (const waiter of this.#waiters) waiter();
      resolve(status);
    }));
  }

  /** Everything the program wrote to the terminal so far, as plain text. */
  get text() {
    return screenText(this.#raw);
  }

  /** Keys typed at the terminal ("\r" Enter, "\x03" Ctrl-C, "\x04" Ctrl-D). */
  send(keys) {
    this.child.stdin.write(keys);
  }

  /**
   * Waits until the text from offset `from` on matches `pattern` -> {match, end: the offset
   * after it}; fails with the text when `timeoutMs` pass or the program exits first.
   * @example const {match, end} = await pty.expect(/\n> $/, 0);
   */
  expect(pattern, from, timeoutMs = 60_000) {
    return new Promise((resolve, reject) => {
      const check = () => {
        const match = pattern.exec(this.text.slice(from));
        if (match) {
          done();
          resolve({match, end: from + match.index + match[0].length});
        } else if (this.child.exitCode !== null) {
          done();
          reject(new Error(`the program exited (${this.child.exitCode}) before ${pattern} came:\n${this.text}`));
        }
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`${pattern} did not come in ${timeoutMs} ms:\n${this.text}`));
      }, timeoutMs);
      const done = () => {
        clearTimeout(timer);
        this.#waiters.delete(check);
      };
      this.#waiters.add(check);
      check();
    });
  }

  /** Ends the program if it still runs (a test that failed midway). */
  kill() {
    if (this.child.exitCode === null) this.child.kill();
  }
}
