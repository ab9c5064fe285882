#!/usr/bin/env node
// layerfold CLI: validate a model through a pipeline of layer nodes, generate, calibrate early
// exit, inspect or plan a GGUF, serve a layer node (`layerfold --help`).
import { runCli } from '../src/cli/main.js';

// A CLI owns its process: exit once the command is done rather than wait for every handle
// (pthread workers, llama.cpp's threads) to let go. stdout/stderr are synchronous on Linux.
process.exit(await runCli(process.argv.slice(2)));
