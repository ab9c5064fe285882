// The CLI's options as a user meets them: every numeric option of every command refuses text
// that is not a number and a number out of its range, naming the option and the value, with
// exit 2 and before anything is loaded; choices refuse what is not one of them; an unknown
// option or command gets the nearest known name; --version prints the package's version;
// each command's --help shows the defaults.
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import {describe, test} from "node:test";

import {COMMANDS} from "../../../js-glue/src/cli/commands.js";
import {runCli} from "../../../js-glue/src/cli/main.js";
import {root} from "../support/models.mjs";

const cli = path.join(root, "js-glue", "bin", "layerfold.js");

function run(args, env = {}) {
  const r = spawnSync(process.execPath, [cli, ...args], {encoding: "utf8", env: {...process.env, ...env}, timeout: 60_000});
  return {status: r.status, stdout: r.stdout, stderr: r.stderr};
}

// runCli in this process, its output captured: the refusals below return before any command runs.
async function runHere(t, args) {
  const out = {stdout: "", stderr: ""};
  t.mock.method(console, "log", (line) => { out.stdout += `${line}\n`; });
  t.mock.method(console, "error", (line) => { out.stderr += `${line}\n`; });
  const status = await runCli(args);
  t.mock.restoreAll();
  return {status, ...out};
}

// Approximate modes' values, as validate and generate take them.
const APPROX = {"truncation-threshold": "1.5", "exit-threshold": "-1", "exit-window": "17", "ffn-top-k": "-0.5", "ffn-top-k-threshold": "2"};

// command -> numeric option -> a value out of its range.
const OUT_OF_RANGE = {
  validate: {"top-k": "0", threads: "257", "max-span": "8193", "image-max-tokens": "1121", ...APPROX},
  generate: {"max-span": "-1", "image-max-tokens": "69", "max-tokens": "0", temperature: "2.5", "top-k": "-1", "top-p": "1.5", seed: "4294967296", threads: "0", ...APPROX},
  chat: {"max-span": "8193", "max-tokens": "0", temperature: "-0.5", "top-k": "1.5", "top-p": "2", seed: "-1", threads: "0"},
  "calibrate-exit": {agreement: "0", "exit-window": "0", positions: "1048577", threads: "0", "max-span": "8193"},
  plan: {nodes: "0", memory: "0", "end-memory": "0", "per-layer-row-cache": "-1", "max-context": "-1", "max-tokens": "0", "max-members": "-1"},
  serve: {
    threads: "0", port: "65536", "max-sessions": "0", "max-kv-bytes": "0", "max-context": "0", "max-tokens": "0", "max-queue": "-1",
    "max-batch-rows": "0", "max-logits-bytes": "3", "body-timeout-ms": "0", "send-timeout-ms": "0", "shutdown-timeout-ms": "2147483648",
    "per-layer-row-cache-bytes": "-1", "max-span": "8193",
  },
  gateway: {
    threads: "300", port: "-1", "max-queue": "-1", "max-cached-sessions": "-1", "max-sessions": "0", "ctx-checkpoints": "9", "request-timeout-ms": "0",
    "send-timeout-ms": "0", "shutdown-timeout-ms": "-1", "draft-max": "65", "draft-min-ngram": "6",
    "image-max-tokens": "1121", "image-max-bytes": "0", "image-fetch-timeout-ms": "0",
  },
};

const NUMERIC = new Set(["integer", "number", "bytes"]);

describe("every numeric option is refused by name, exit 2", () => {
  test("the table covers every numeric option of every command", () => {
    const numeric = Object.fromEntries(Object.entries(COMMANDS).map(([name, c]) =>
      [name, Object.entries(c.options).filter(([, spec]) => NUMERIC.has(spec.kind)).map(([option]) => option).sort()]));
    const covered = Object.fromEntries(Object.keys(COMMANDS).map((name) => [name, Object.keys(OUT_OF_RANGE[name] ?? {}).sort()]));
    assert.deepEqual(covered, numeric);
  });

  for (const [command, options] of Object.entries(OUT_OF_RANGE)) {
    for (const [option, outOfRange] of Object.entries(options)) {
      test(`${command} --${option}: "abc", "", "1e" and ${outOfRange}`, async (t) => {
        for (const value of ["abc", "", "1e", outOfRange]) {
          const r = await runHere(t, [command, `--${option}=${value}`]);
          assert.equal(r.status, 2, r.stdout + r.stderr);
          assert.equal(r.stdout, "");
          const quoted = JSON.stringify(value).replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
          assert.match(r.stderr, new RegExp(`^layerfold ${command}: --${option} must be [^\\n]+, got ${quoted}\\n$`));
        }
      });
    }
  }

  test("the refusal says what is accepted", async (t) => {
    const cases = [
      [["validate", "--threads", "abc"], 'layerfold validate: --threads must be an integer from 1 to 256, got "abc"\n'],
      [["validate", "--threads", "0"], 'layerfold validate: --threads must be an integer from 1 to 256, got "0"\n'],
      [["generate", "--temperature", "abc", "--json"], 'layerfold generate: --temperature must be a number from 0 to 2, got "abc"\n'],
      [["generate", "--max-tokens", "2.5"], 'layerfold generate: --max-tokens must be an integer >= 1, got "2.5"\n'],
      [["calibrate-exit", "--agreement", "1.01"], 'layerfold calibrate-exit: --agreement must be a number > 0 and <= 1, got "1.01"\n'],
      [["plan", "m.gguf", "--nodes", "2", "--memory", "12XB"],
        'layerfold plan: --memory must be a number of bytes >= 1, optionally with KiB, MiB or GiB, got "12XB"\n'],
      [["serve", "--port", "0x50"], 'layerfold serve: --port must be an integer from 0 to 65535, got "0x50"\n'],
    ];
    for (const [args, message] of cases) {
      const r = await runHere(t, args);
      assert.equal(r.status, 2);
      assert.equal(r.stderr, message);
    }
  });

  test("a value in range passes the options and reaches the command", async (t) => {
    // plan's own check comes after its options are read: a missing file, not an option, is the refusal.
    const r = await runHere(t, ["plan", "/nonexistent/m.gguf", "--nodes", "3", "--memory", "1.5GiB", "--max-context", "0"]);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /nonexistent/);
    assert.doesNotMatch(r.stderr, /must be/);
  });

  test("serve's and gateway's variables are read as their options are, and refused by their own name", () => {
    const serve = run(["serve", "--model", "m.gguf"], {PORT: "abc"});
    assert.equal(serve.status, 2);
    assert.equal(serve.stderr, 'layerfold serve: PORT must be an integer from 0 to 65535, got "abc"\n');
    const gateway = run(["gateway"], {DRAFT_MAX: "100"});
    assert.equal(gateway.status, 2);
    assert.equal(gateway.stderr, 'layerfold gateway: DRAFT_MAX must be an integer from 1 to 64, got "100"\n');
  });
});

describe("choices", () => {
  const cases = [
    ["validate", "build", "fast", "threaded, single"],
    ["generate", "build", "fast", "threaded, single"],
    ["calibrate-exit", "build", "fast", "threaded, single"],
    ["gateway", "build", "fast", "threaded, single"],
    ["gateway", "speculative", "medusa", "prompt-lookup, mtp, off"],
    ["serve", "ffn-down-layout", "rows", "units, features"],
  ];
  for (const [command, option, value, choices] of cases) {
    test(`${command} --${option} ${value} is refused, naming the choices`, async (t) => {
      const r = await runHere(t, [command, `--${option}`, value]);
      assert.equal(r.status, 2);
      assert.equal(r.stderr, `layerfold ${command}: --${option} must be one of ${choices}, got "${value}"\n`);
    });
  }

  test("a switch's variable is 1 or 0", () => {
    const r = run(["inspect", "m.gguf"], {LAYERFOLD_ALLOW_UNVALIDATED_SOURCE: "yes"});
    assert.equal(r.status, 2);
    assert.equal(r.stderr, 'layerfold inspect: LAYERFOLD_ALLOW_UNVALIDATED_SOURCE must be 1 (or 0, or unset), got "yes"\n');
  });
});

describe("unknown options and commands", () => {
  test("a mistyped option is refused with the nearest known one", () => {
    const r = run(["validate", "--thread", "2"]);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /^layerfold validate: unknown option --thread \(did you mean --threads\?\)/);
    const assigned = run(["generate", "--max-token=4"]);
    assert.equal(assigned.status, 2);
    assert.match(assigned.stderr, /unknown option --max-token \(did you mean --max-tokens\?\)/);
  });

  test("an option far from every known one gets no guess", () => {
    const r = run(["plan", "--zzzzzzzz"]);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /^layerfold plan: unknown option --zzzzzzzz;/);
    assert.doesNotMatch(r.stderr, /did you mean/);
  });

  test("a mistyped command is refused with the nearest known one, and the usage", () => {
    const r = run(["valdiate"]);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /^layerfold: unknown command "valdiate" \(did you mean validate\?\)\nusage:/);
    const far = run(["frobnicate"]);
    assert.equal(far.status, 2);
    assert.match(far.stderr, /^layerfold: unknown command "frobnicate"\nusage:/);
  });

  test("an argument a command does not take is refused", () => {
    const r = run(["validate", "model.gguf"]);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /^layerfold validate: unexpected argument "model.gguf"/);
  });
});

test("--version prints the package's version", () => {
  const {version} = JSON.parse(fs.readFileSync(path.join(root, "js-glue", "package.json"), "utf8"));
  const r = run(["--version"]);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, `${version}\n`);
});

describe("--help shows each option's default", () => {
  // command -> option -> the default its help line shows.
  const DEFAULTS = {
    validate: {prompt: '"The capital of France is"', expect: '" Paris"', "top-k": "5", threads: "the machine's parallelism"},
    generate: {"max-tokens": "32", temperature: "0", "top-k": "40", "top-p": "0.95", seed: "1", "exit-window": "2"},
    chat: {"max-tokens": "what the model's context leaves", temperature: "0", "top-k": "40", "top-p": "0.95", seed: "1", system: "none"},
    "calibrate-exit": {agreement: "0.99", "exit-window": "2", positions: "256"},
    plan: {memory: "4GiB", "per-layer-row-cache": "8MiB", "max-tokens": "512"},
    serve: {port: "8080", host: '"0.0.0.0"', "max-sessions": "64", "max-tokens": "2048", "max-queue": "16", "shutdown-timeout-ms": "10000",
      "ffn-down-layout": "units"},
    gateway: {port: "8000", host: '"127.0.0.1"', "max-queue": "16", "max-cached-sessions": "16", "ctx-checkpoints": "4", "request-timeout-ms": "600000",
      speculative: "off", "draft-max": "8", "draft-min-ngram": "3"},
  };
  for (const [command, defaults] of Object.entries(DEFAULTS)) {
    test(`${command} --help`, () => {
      const r = run([command, "--help"]);
      assert.equal(r.status, 0, r.stderr);
      // One entry per option, its wrapped lines joined.
      const entries = r.stdout.replace(/\n {20,}/g, " ").split("\n");
      for (const [option, shown] of Object.entries(defaults)) {
        const entry = entries.find((line) => line.startsWith(`  --${option} `));
        assert.ok(entry, `no --${option} in\n${r.stdout}`);
        assert.ok(entry.includes(`default ${shown}`), entry);
      }
    });
  }
});
