// Running a command without blocking the test's own servers, or its clients' kept-alive sockets:
// while spawnSync waits, no server answers and no closed connection is noticed.
import {spawn} from "node:child_process";
import {once} from "node:events";

/**
 * Runs command to its end -> {status, signal, stdout, stderr}; the promise's `child` is the process,
 * for a test that stops it partway.
 * @example const r = await runAsync(process.execPath, [cli, "pull", url], {env: {...process.env, HF_ENDPOINT: hub}});
 */
export function runAsync(command, args, options = {}) {
  const child = spawn(command, args, {stdio: ["ignore", "pipe", "pipe"], ...options});
  const done = new Promise((resolve) => {
    let stdout = "", stderr = "";
    child.stdout.on("data", (d) => { stdout += d; });
    child.stderr.on("data", (d) => { stderr += d; });
    child.on("close", (status, signal) => resolve({status, signal, stdout, stderr}));
  });
  done.child = child;
  return done;
}

/**
 * Runs command to its end with `input` (if any) on its stdin -> its stdout as a Buffer; a command
 * that fails throws, naming it, how it ended and what it wrote to stderr, as execFileSync does.
 * @example const out = await runChecked(program, [vocab], {input: "{}\n"});
 */
export async function runChecked(command, args, {input = null, ...options} = {}) {
  const child = spawn(command, args, {stdio: [input === null ? "ignore" : "pipe", "pipe", "pipe"], ...options});
  const stdout = [], stderr = [];
  child.stdout.on("data", (d) => stdout.push(d));
  child.stderr.on("data", (d) => stderr.push(d));
  // A program that exits before reading all of its input: its exit status says why, not EPIPE.
  if (input !== null) child.stdin.on("error", () => {}).end(input);
  const [status, signal] = await once(child, "close");
  if (status !== 0) {
    throw new Error(`${command} ${args.join(" ")} ended with ${signal ?? `status ${status}`}: ${Buffer.concat(stderr).toString("utf8").slice(-4000)}`);
  }
  return Buffer.concat(stdout);
}
