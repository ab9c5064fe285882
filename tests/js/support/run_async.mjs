// Running a command without blocking the test's own servers (spawnSync would stop them answering).
import {spawn} from "node:child_process";

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
