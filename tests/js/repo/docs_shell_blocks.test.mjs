// The docs run as written: every ```sh / ```bash / ```shell / ```console block of README.md and
// docs/*.md runs, in document order, in one bash per file (so `cd`, variables and background
// servers carry from block to block, as in a reader's terminal), inside a scratch copy of the
// repository whose build outputs (build/native, js-glue/dist, ...) are links to the real ones.
// Each block must exit 0 and print what its `expect` directive or its console output shows;
// a block marked `<!-- docs-test: skip (reason) -->` is listed as skipped with its reason.
// After a file, everything its blocks started (one process group) is stopped.
// Directives: tests/js/support/docs_blocks.mjs. DOCS_TEST_VERBOSE=1 prints every block's output.
import assert from "node:assert/strict";
import {spawn} from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {after, describe, test} from "node:test";

import {DEFAULT_TIMEOUT_S, RUN_LANGUAGES, blockTitle, consoleParts, extractBlocks, squash} from "../support/docs_blocks.mjs";
import {root} from "../support/models.mjs";

const DOCS = ["README.md", ...fs.readdirSync(path.join(root, "docs")).filter((f) => f.endsWith(".md")).sort().map((f) => `docs/${f}`)];

// Not copied into the scratch tree: version control, build outputs and installed packages. The
// build outputs a reader has after scripts/setup are linked instead; build/models and build/edge
// are left out so that the docs must make what they use.
const NOT_COPIED = new Set([".git", "build", "models", ".cache", "js-glue/node_modules", "js-glue/dist"]);
const LINKED = ["js-glue/node_modules", "js-glue/dist"];
const BUILD_NOT_LINKED = new Set(["models", "edge"]);

const scratchDirs = [];
after(() => { for (const dir of scratchDirs) fs.rmSync(dir, {recursive: true, force: true}); });

/** A scratch copy of the working tree (timestamps kept, so scripts/make-model sees its binary as fresh). */
function scratchCopy() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lf-docs-"));
  scratchDirs.push(dir);
  fs.cpSync(root, dir, {
    recursive: true,
    preserveTimestamps: true,
    filter: (src) => !NOT_COPIED.has(path.relative(root, src)) && !src.endsWith(".gguf"),
  });
  for (const rel of LINKED) {
    if (fs.existsSync(path.join(root, rel))) fs.symlinkSync(path.join(root, rel), path.join(dir, rel));
  }
  fs.mkdirSync(path.join(dir, "build"));
  if (fs.existsSync(path.join(root, "build"))) {
    for (const entry of fs.readdirSync(path.join(root, "build"))) {
      if (!BUILD_NOT_LINKED.has(entry)) fs.symlinkSync(path.join(root, "build", entry), path.join(dir, "build", entry));
    }
  }
  return dir;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function groupAlive(pgid) {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * One bash in its own process group, running blocks one after the other. Each block is sourced
 * with `set -eo pipefail`, so a failing command ends the shell; its output goes to files, and its
 * status comes back on fd 3.
 */
class Shell {
  constructor(cwd) {
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), "lf-docs-shell-"));
    scratchDirs.push(this.dir);
    this.proc = spawn("bash", ["--noprofile", "--norc"], {cwd, detached: true, stdio: ["pipe", "ignore", "pipe", "pipe"]});
    this.stderr = "";
    this.proc.stderr.on("data", (chunk) => { this.stderr += chunk; });
    this.exited = new Promise((resolve) => this.proc.once("exit", (code, signal) => resolve({code, signal})));
    this.pending = null;
    let buffered = "";
    this.proc.stdio[3].on("data", (chunk) => {
      buffered += chunk;
      let nl;
      while ((nl = buffered.indexOf("\n")) >= 0) {
        const status = Number(buffered.slice(0, nl));
        buffered = buffered.slice(nl + 1);
        this.pending?.resolve({status});
      }
    });
    this.exited.then(({code, signal}) => this.pending?.resolve({status: code ?? signal, exited: true}));
    this.proc.stdin.write("set -eo pipefail\n");
    this.count = 0;
  }

  /** Runs `script`; resolves {status, output, exited, timedOut}. */
  async run(script, timeoutS) {
    const n = this.count++;
    const file = path.join(this.dir, `block-${n}.sh`);
    const out = path.join(this.dir, `block-${n}.out`);
    fs.writeFileSync(file, `${script}\n`);
    const done = new Promise((resolve) => { this.pending = {resolve}; });
    this.proc.stdin.write(`source ${JSON.stringify(file)} > ${JSON.stringify(out)} 2>&1 < /dev/null; echo "$?" >&3\n`);
    let timer;
    const timeout = new Promise((resolve) => { timer = setTimeout(() => resolve({timedOut: true}), timeoutS * 1000); });
    const result = await Promise.race([done, timeout]);
    clearTimeout(timer);
    this.pending = null;
    const output = fs.existsSync(out) ? fs.readFileSync(out, "utf8") : "";
    return {...result, output};
  }

  /** SIGTERM to the group (the shell and whatever its blocks left running), SIGKILL after 10 s. */
  async stop() {
    const pgid = this.proc.pid;
    if (!groupAlive(pgid)) return;
    process.kill(-pgid, "SIGTERM");
    for (let i = 0; i < 100 && groupAlive(pgid); i++) await sleep(100);
    if (groupAlive(pgid)) process.kill(-pgid, "SIGKILL");
  }
}

const tail = (text, n = 40) => text.trimEnd().split("\n").slice(-n).join("\n");

for (const doc of DOCS) {
  const blocks = extractBlocks(fs.readFileSync(path.join(root, doc), "utf8")).filter((b) => RUN_LANGUAGES.has(b.lang));
  if (blocks.length === 0) continue;

  describe(doc, () => {
    let shell = null;
    let broken = null;  // the block whose failure ended the shell
    after(async () => { await shell?.stop(); });

    const scriptOf = (block) => (block.lang === "console" ? consoleParts(block.body).script : block.body);

    test("no block runs a bare `layerfold` (it is not on PATH: node js-glue/bin/layerfold.js)", () => {
      const bare = blocks.flatMap((block) => scriptOf(block).split("\n")
        .filter((l) => /(^|[;&|(]\s*|^\S+=\S+\s+)layerfold\s/.test(l.trim()))
        .map((l) => `${doc}:${block.line}: ${l.trim()}`));
      assert.deepEqual(bare, []);
    });

    for (const block of blocks) {
      const name = `${doc}:${block.line} ${blockTitle(block)}`;
      const {skip, expect, timeout = DEFAULT_TIMEOUT_S} = block.directives;
      const script = scriptOf(block);
      const shown = block.lang === "console" ? consoleParts(block.body).output : [];

      if (skip) {
        test(name, {skip});
        continue;
      }
      test(name, {timeout: (timeout + 15) * 1000}, async (t) => {
        if (broken) return t.skip(`not run: ${broken} failed before it`);
        shell ??= new Shell(scratchCopy());
        const result = await shell.run(script, timeout);
        const where = `${name}\n--- output (last lines) ---\n${tail(result.output)}\n${tail(shell.stderr, 10)}`;
        if (result.timedOut || result.status !== 0 || result.exited) broken = `${doc}:${block.line}`;
        assert.ok(!result.timedOut, `timed out after ${timeout} s: ${where}`);
        assert.equal(result.status, 0, `exit status ${result.status}: ${where}`);
        assert.ok(!result.exited, `the shell exited: ${where}`);
        if (process.env.DOCS_TEST_VERBOSE) t.diagnostic(result.output);
        const wanted = expect ?? shown;
        const got = squash(result.output);
        for (const w of wanted) assert.ok(got.includes(squash(w)), `expected ${JSON.stringify(w)} in the output: ${where}`);
      });
    }
  });
}

describe("docs-test directives", () => {
  test("skip, expect and timeout are read from the comments above a block; other blocks are not run", () => {
    const md = [
      "text", "<!-- docs-test: skip (needs a cloud) -->", "```sh", "gcloud run deploy", "```",
      "", "<!-- docs-test: expect \"n_past\" \"say \\\"hi\\\"\" -->", "<!-- docs-test: timeout 5 -->", "",
      "```console", "$ echo one \\", "  two", "one two", "```", "```", "$ not run", "```", "```json", "{}", "```",
    ].join("\n");
    const blocks = extractBlocks(md);
    assert.deepEqual(blocks.map((b) => [b.line, b.lang]), [[3, "sh"], [10, "console"], [15, ""], [18, "json"]]);
    assert.deepEqual(blocks[0].directives, {skip: "needs a cloud"});
    assert.deepEqual(blocks[1].directives, {expect: ["n_past", 'say "hi"'], timeout: 5});
    assert.deepEqual(consoleParts(blocks[1].body), {script: "echo one \\\n  two", output: ["one two"]});
    assert.deepEqual(blocks[2].directives, {});
    assert.throws(() => extractBlocks("<!-- docs-test: skipp -->\n```sh\nls\n```\n"), /unknown docs-test directive/);
  });
});
