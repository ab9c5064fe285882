// Running a command without blocking the test's own servers, or its clients' kept-alive sockets:
// while spawnSync waits, no server answers and no closed connection is noticed.
import {spawn} from "node:child_process";

/**
 * Runs command to its end, with `input` (if any) on its stdin -> {status, signal, stdout, stderr},
 * its output decoded as UTF-8 whole (a character split across reads stays one); the promise's
 * `child` is the process, for a test that stops it partway.
 * @example const r = await runAsync(process.execPath, [cli, "pull", url], {env: {...process.env, HF_ENDPOINT: hub}});
 */
export function runAsync(command, args, {input = null, ...options} = {}) {
  const child = spawn(command, args, {stdio: [input === null ? "ignore" : "pipe", "pipe", "pipe"], ...options});
  // A program that exits before reading all of its input: its exit status says why, not EPIPE.
  if (input !== null) child.stdin.on("error", () => {}).end(input);
  const done = new Promise((resolve) => {
    let stdout = "", stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d) => { stdout += d; });
    child.stderr.setEncoding("utf8").on("data", (d) => { stderr += d; });
    child.on("close", (status, signal) => resolve({status, signal, stdout, stderr}));
  });
  done.child = child;
  return done;
}

/**
 * runAsync's stdout; a command that fails throws, naming it, how it ended and the end of what it
 * wrote to stderr, as execFileSync does.
 * @example const out = await runChecked(program, [vocab], {input: "{}\n"});
 */
export async function runChecked(command, args, options = {}) {
  const {status, signal, stdout, stderr} = await runAsync(command, args, options);
  if (status !== 0) throw new Error(`${command} ${args.join(" ")} ended with ${signal ?? `status ${status}`}: ${stderr.slice(-4000)}`);
  return stdout;
}
