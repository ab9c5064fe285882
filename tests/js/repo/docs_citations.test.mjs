// Every citation of a doc's section — `docs/forward-pass.md, "Where agreement depends on the
// shape"`, or `gguf.md, "Container"` for a file of docs/ — in the code's comments, the docs and
// README names a heading that doc has. A citation may wrap across comment lines, and may name a
// heading by its lead: the words before a ": ", " (" or ", " of the heading.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import {test} from "node:test";

import {root} from "../support/models.mjs";

// Where citations are written; installed packages and build outputs are not ours.
const SEARCHED = ["README.md", "CMakeLists.txt", "docs", "src", "include", "js-glue", "scripts", "tests", "wasm", "container"];
const NOT_SEARCHED = new Set(["node_modules", "dist", "golden", "corpus"]);
const TEXT_FILE = /\.(md|h|c|cpp|mjs|js|cjs|ts|cmake|txt|sh|wat|json|toml|ya?ml)$|^[^.]+$/;

/** Paths (relative to root) of the text files under rel, symbolic links left out. */
function* textFiles(rel) {
  const stat = fs.lstatSync(path.join(root, rel), {throwIfNoEntry: false});
  if (!stat || stat.isSymbolicLink()) return;
  if (stat.isDirectory()) {
    for (const entry of fs.readdirSync(path.join(root, rel)).sort()) {
      if (!NOT_SEARCHED.has(entry)) yield* textFiles(path.join(rel, entry));
    }
  } else if (TEXT_FILE.test(path.basename(rel))) {
    yield rel;
  }
}

/**
 * The (doc, section) citations of a text, as {doc, section, line}. Line breaks with the comment
 * marker that follows them (`//`, `#`, `*`, `--`, `;`) read as one space, so that a citation cut
 * by the comment's width is still found.
 * @example citations('// (docs/gguf.md,\n// "Container")') // [{doc: "gguf.md", section: "Container", line: 1}]
 */
function citations(text) {
  const lineStarts = [0];
  for (let i = text.indexOf("\n"); i >= 0; i = text.indexOf("\n", i + 1)) lineStarts.push(i + 1);
  // Each joined break keeps its length's worth of offsets in `offsets`, to name the line.
  let flat = "";
  const offsets = [];
  let last = 0;
  for (const m of text.matchAll(/\n[ \t]*(?:\/\/+|#+|\*|--|;+)?[ \t]*/g)) {
    for (let i = last; i < m.index; i++) offsets.push(i);
    flat += text.slice(last, m.index) + " ";
    offsets.push(m.index);
    last = m.index + m[0].length;
  }
  for (let i = last; i < text.length; i++) offsets.push(i);
  flat += text.slice(last);
  const found = [];
  for (const m of flat.matchAll(/([A-Za-z0-9_-]+\.md)[`)\]]*,\s*"([^"\n]+)"/g)) {
    const offset = offsets[m.index];
    let line = 0;
    while (line + 1 < lineStarts.length && lineStarts[line + 1] <= offset) line++;
    found.push({doc: m[1], section: m[2], line: line + 1});
  }
  return found;
}

/** The headings of a markdown text, outside fenced code blocks. */
function headings(markdown) {
  const found = [];
  let fenced = false;
  for (const line of markdown.split("\n")) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    else if (!fenced) {
      const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
      if (m) found.push(m[1]);
    }
  }
  return found;
}

/** Whether section names one of the headings: the whole heading, or its lead. */
function namesHeading(section, docHeadings) {
  return docHeadings.some((h) => h === section || [": ", " (", ", "].some((cut) => h.startsWith(section + cut)));
}

/** README.md is the root's; every other doc is a file of docs/. */
function docPath(doc) {
  return doc === "README.md" ? path.join(root, doc) : path.join(root, "docs", doc);
}

test("citations are found across wrapped comment lines, in JSDoc and in markdown links", () => {
  // Real headings, so that this file's own citations pass the check below.
  const text = `// The reader (docs/gguf.md, "Alignment and
// data") and the writer.
/**
 * Inputs (docs/forward-pass.md,
 * "Per-layer inputs and shared KV in a pipeline"). */
# the sums (docs/kernels.md, "The fused step")
see [gemma-architecture.md, "Shared-KV layers"](gemma-architecture.md#shared-kv-layers)
the table ([docs/benchmarks.md](docs/benchmarks.md), "Many sessions at once")`;
  assert.deepEqual(citations(text), [
    {doc: "gguf.md", section: "Alignment and data", line: 1},
    {doc: "forward-pass.md", section: "Per-layer inputs and shared KV in a pipeline", line: 4},
    {doc: "kernels.md", section: "The fused step", line: 6},
    {doc: "gemma-architecture.md", section: "Shared-KV layers", line: 7},
    {doc: "benchmarks.md", section: "Many sessions at once", line: 8},
  ]);
});

test("a section names a heading whole or by the words before its ': ', ' (' or ', '", () => {
  const docHeadings = headings("# Doc\n\n## Limits: what one request holds\n\n```sh\n# not a heading\n```\n### Sessions and prefix reuse\n");
  assert.deepEqual(docHeadings, ["Doc", "Limits: what one request holds", "Sessions and prefix reuse"]);
  assert.ok(namesHeading("Limits", docHeadings));
  assert.ok(namesHeading("Sessions and prefix reuse", docHeadings));
  assert.ok(!namesHeading("Prefix reuse", docHeadings));
  assert.ok(!namesHeading("Sessions", docHeadings));
  assert.ok(!namesHeading("not a heading", docHeadings));
});

test("every (doc, \"section\") citation names a heading of that doc", () => {
  const headingsOf = new Map();
  const wrong = [];
  let count = 0;
  for (const file of SEARCHED.flatMap((rel) => [...textFiles(rel)])) {
    const text = fs.readFileSync(path.join(root, file), "utf8");
    if (text.includes("\0")) continue;
    for (const c of citations(text)) {
      count++;
      const where = `${file}:${c.line}: ${c.doc}, "${c.section}"`;
      if (!headingsOf.has(c.doc)) {
        const doc = docPath(c.doc);
        headingsOf.set(c.doc, fs.existsSync(doc) ? headings(fs.readFileSync(doc, "utf8")) : null);
      }
      const docHeadings = headingsOf.get(c.doc);
      if (docHeadings === null) wrong.push(`${where}: no such doc`);
      else if (!namesHeading(c.section, docHeadings)) wrong.push(`${where}: no such heading`);
    }
  }
  assert.ok(count > 100, `only ${count} citations found: the search misses files`);
  assert.deepEqual(wrong, []);
});
