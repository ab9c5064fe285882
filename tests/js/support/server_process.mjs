// `layerfold serve` processes for the server tests: started on a free loopback port (the server
// picks it: --port 0, read from its "listening" log line), polled until ready, stopped by signal,
// and always killed at the end of the test that started them.
import {spawn} from "node:child_process";
import path from "node:path";
import readline from "node:readline";

import {root} from "./models.mjs";

export const cli = path.join(root, "js-glue", "bin", "layerfold.js");

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Starts `command argv...` (default: node, layerfold serve with args) with env added to the
 * test's environment. Resolves once the server logged its port: {url, child, logs, exited,
 * stop(signal)}. `t.after` kills it if the test did not stop it; with group, it runs in a process
 * group of its own (a wrapper such as npx and what it starts), all of which `t.after` kills.
 * @example const server = await startServer(t, {args: ["--model", file, "--layers", "0-0"]});
 */
export async function startServer(t, {args = [], env = {}, argv = [cli, "serve", "--host", "127.0.0.1", "--port", "0", "--threads", "1", ...args],
  command = process.execPath, cwd = root, group = false} = {}) {
  const child = spawn(command, argv, {cwd, env: {...process.env, ...env}, stdio: ["ignore", "pipe", "pipe"], detached: group});
  const logs = [];
  let stderr = "";
  child.stderr.on("data", (chunk) => { stderr += chunk; });
  const exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve({code, signal})));
  t.after(() => {
    if (group) {
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch (error) {
        if (error.code !== "ESRCH") throw error;  // ESRCH: the group is gone already
      }
    } else if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  });
  const port = await new Promise((resolve, reject) => {
    readline.createInterface({input: child.stdout}).on("line", (line) => {
      let entry;
      try {
        entry = JSON.parse(line);
      } catch {
        return reject(new Error(`not a JSON log line: ${line}`));
      }
      logs.push(entry);
      if (entry.message === "listening") resolve(entry.port);
    });
    exited.then(({code, signal}) => reject(new Error(`server exited (${code ?? signal}) before listening: ${stderr}`)));
  });
  return {
    url: `http://127.0.0.1:${port}`,
    child,
    logs,
    exited,
    stderr: () => stderr,
    async stop(signal = "SIGTERM") {
      child.kill(signal);
      return exited;
    },
  };
}

/**
 * Polls GET url/readyz until 200 (at most timeoutMs).
 * @example await waitReady(server.url);
 */
export async function waitReady(url, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  let last = "no answer";
  while (Date.now() < deadline) {
    try {
      const response = await fetch(`${url}/readyz`);
      last = `${response.status} ${await response.text()}`;
      if (response.status === 200) return;
    } catch (error) {
      last = error.cause?.code ?? error.message;
    }
    await sleep(50);
  }
  throw new Error(`${url} not ready within ${timeoutMs} ms (${last})`);
}

/** Raw bytes of a Float32Array, for request bodies and byte comparisons. */
export function bytesOf(floats) {
  return Buffer.from(floats.buffer, floats.byteOffset, floats.byteLength);
}

/**
 * POST /v1/sessions/{session}/forward: {status, bytes, headers, error} (error: the JSON error body);
 * signal (an AbortSignal) bounds or aborts it.
 * @example const r = await forward(url, {session: "s", startPos: 0, hidden, token});
 */
export async function forward(url, {session, startPos, hidden, lastOnly = false, token, headers = {}, signal}) {
  const response = await fetch(`${url}/v1/sessions/${session}/forward?start_pos=${startPos}${lastOnly ? "&last_only=1" : ""}`, {
    method: "POST", signal,
    headers: {"content-type": "application/octet-stream", ...(token ? {authorization: `Bearer ${token}`} : {}), ...headers},
    body: bytesOf(hidden),
  });
  const bytes = Buffer.from(await response.arrayBuffer());
  const error = response.headers.get("content-type")?.startsWith("application/json") ? JSON.parse(bytes.toString()).error : null;
  return {status: response.status, bytes, headers: response.headers, error};
}
