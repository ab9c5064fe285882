#!/usr/bin/env node
// layerfold CLI: validate a model through a pipeline of layer nodes, generate, calibrate early
// exit, inspect or plan a GGUF, serve a layer node (`layerfold --help`).
import { runCli } from '../src/cli/main.js';

// Resolves once everything written to `stream` so far has been handed to the OS. Writes to a
// pipe are asynchronous: exiting before they drain cuts the output at the pipe's buffer (64 KiB).
const drained = (stream) => new Promise((resolve) => {
  if (stream.destroyed || !stream.writable) resolve();
  else stream.write('', () => resolve());
});

// A CLI owns its process: once the command is done and its output is out, exit rather than wait
// for every handle (pthread workers, llama.cpp's threads) to let go.
process.exitCode = await runCli(process.argv.slice(2));
await Promise.all([drained(process.stdout), drained(process.stderr)]);
process.exit();
