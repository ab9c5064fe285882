// Shell blocks of the Markdown docs, as docs_shell_blocks.test.mjs runs them: every ```sh,
// ```bash, ```shell and ```console block, with the `<!-- docs-test: ... -->` directives written
// just above it. Other blocks (```text, ```json, ```js, or no language: example output) are
// never run.
//
// Directives, one or more HTML comments between the block and the text above it:
//   <!-- docs-test: skip (needs Cloudflare credentials) -->   not run; listed as skipped with the reason
//   <!-- docs-test: expect "n_past" "204" -->                each string must appear in the block's output
//   <!-- docs-test: timeout 120 -->                          seconds the block may take (default 60)
// A ```console block is `$ command` lines (a line ending in `\` continues on the next) followed by
// the output they print; without an `expect`, every output line shown must appear in what the
// commands print (spaces collapsed).

export const RUN_LANGUAGES = new Set(["sh", "bash", "shell", "console"]);
export const DEFAULT_TIMEOUT_S = 60;

const FENCE = /^(\s*)(`{3,}|~{3,})\s*([\w+-]*)/;
const DIRECTIVE = /^\s*<!--\s*docs-test:\s*(.*?)\s*-->\s*$/;

/**
 * Parses one directive's text into {skip, expect, timeout} fields (merged into `into`).
 * @example parseDirective('expect "a" "b c"', {}) // {expect: ["a", "b c"]}
 */
export function parseDirective(text, into = {}) {
  let m;
  if ((m = /^skip\s*\((.+)\)$/.exec(text))) {
    into.skip = m[1].trim();
  } else if ((m = /^expect\s+(.+)$/.exec(text))) {
    const strings = [...m[1].matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((s) => JSON.parse(`"${s[1]}"`));
    if (strings.length === 0) throw new Error(`docs-test expect needs "quoted" strings: ${text}`);
    into.expect = [...(into.expect ?? []), ...strings];
  } else if ((m = /^timeout\s+(\d+)$/.exec(text))) {
    into.timeout = Number(m[1]);
  } else {
    throw new Error(`unknown docs-test directive: ${text}`);
  }
  return into;
}

/**
 * The fenced blocks of a Markdown text in document order:
 * {line (1-based, of the opening fence), lang, body, directives: {skip, expect, timeout}}.
 * @example extractBlocks("<!-- docs-test: skip (cloud) -->\n```sh\nls\n```\n")[0].directives.skip // "cloud"
 */
export function extractBlocks(markdown) {
  const lines = markdown.split("\n");
  const blocks = [];
  for (let i = 0; i < lines.length; i++) {
    const open = FENCE.exec(lines[i]);
    if (!open) continue;
    const [, indent, fence, lang] = open;
    const body = [];
    let j = i + 1;
    for (; j < lines.length; j++) {
      const close = lines[j].trim();
      if (close.startsWith(fence[0].repeat(fence.length)) && /^[`~]+$/.test(close)) break;
      body.push(lines[j].startsWith(indent) ? lines[j].slice(indent.length) : lines[j]);
    }
    if (j === lines.length) throw new Error(`unclosed code fence at line ${i + 1}`);
    const directives = {};
    for (let k = i - 1; k >= 0; k--) {
      if (lines[k].trim() === "") continue;
      const d = DIRECTIVE.exec(lines[k]);
      if (!d) break;
      parseDirective(d[1], directives);
    }
    blocks.push({line: i + 1, lang: lang.toLowerCase(), body: body.join("\n"), directives});
    i = j;
  }
  return blocks;
}

/**
 * A ```console block's commands (as one script) and the output lines it shows.
 * @example consoleParts("$ echo a \\\n  b\na b") // {script: "echo a \\\n  b", output: ["a b"]}
 */
export function consoleParts(body) {
  const commands = [];
  const output = [];
  let continuing = false;
  for (const line of body.split("\n")) {
    if (continuing) {
      commands.push(line);
    } else if (line.startsWith("$ ")) {
      commands.push(line.slice(2));
    } else {
      if (line.trim() !== "") output.push(line);
      continue;
    }
    continuing = line.endsWith("\\");
  }
  return {script: commands.join("\n"), output};
}

/** Collapses runs of white space, so that column alignment does not matter. */
export const squash = (text) => text.replace(/\s+/g, " ").trim();

/** The first command of a block, shortened, for its test's name. */
export function blockTitle(block) {
  const script = block.lang === "console" ? consoleParts(block.body).script : block.body;
  const first = script.split("\n").find((l) => l.trim() !== "" && !l.trim().startsWith("#")) ?? "";
  return first.length > 90 ? `${first.slice(0, 87)}...` : first;
}
