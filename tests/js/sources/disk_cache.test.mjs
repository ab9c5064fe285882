// The disk cache heals itself and is never why a load fails: a corrupt entry is dropped and the
// object opened again, a full disk leaves no pieces or temporary files behind and the load goes
// on uncached, and a cache folder that cannot be written (or made) leaves the load without it;
// each is said through onWarning. A full or read-only disk is simulated by replacing the cache's
// write functions (no tmpfs here); a folder that cannot be made is real.
import assert from "node:assert/strict";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import {after, before, describe, test} from "node:test";

import {openSource} from "../../../js-glue/src/sources/open_source.js";
import {fingerprint} from "../support/fingerprint.mjs";
import {model} from "../support/models.mjs";

const tiny = () => model("tiny", "tiny", ["--type", "Q4_0"]);
const fast = {retries: 2, backoffMs: 5, maxBackoffMs: 20};
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "lf-disk-cache-"));


// A range server over the model with a strong ETag, counting its requests.
async function startServer(file) {
  const data = fs.readFileSync(file);
  const counts = {HEAD: 0, GET: 0};
  const server = http.createServer((req, res) => {
    counts[req.method]++;
    if (req.method === "HEAD") { res.writeHead(200, {"content-length": data.length, etag: '"v1"'}).end(); return; }
    const [a, b] = /bytes=(\d+)-(\d+)/.exec(req.headers.range).slice(1).map(Number);
    res.writeHead(206, {"content-range": `bytes ${a}-${b}/${data.length}`, etag: '"v1"'}).end(data.subarray(a, b + 1));
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {url: `http://127.0.0.1:${server.address().port}/tiny.gguf`, counts, stop: () => new Promise((r) => server.close(r))};
}

const filesUnder = (dir) => fs.readdirSync(dir, {recursive: true}).map((f) => path.join(dir, f)).filter((f) => fs.statSync(f).isFile());
const failure = (code) => Object.assign(new Error(`${code}: simulated`), {code});

let server;
let reference;
before(async () => {
  reference = await fingerprint({model: tiny()});
  server = await startServer(tiny());
});
after(async () => {
  await server?.stop();
  fs.rmSync(tmp, {recursive: true, force: true});
});

describe("a corrupt objects/*.json entry is dropped and the object opened again", () => {
  const spoilers = [
    ["torn (bad JSON)", (text) => text.slice(0, text.length >> 1)],
    ["a wrong size", (text) => text.replace(/"size":(\d+)/, (m, n) => `"size":${Number(n) + 4096}`)],
    ["not an entry at all", () => "null"],
  ];
  for (const [title, spoil] of spoilers) {
    test(title, async () => {
      const cacheDir = path.join(tmp, `entry-${title.replace(/\W+/g, "-")}`);
      assert.ok((await fingerprint({model: server.url, cacheDir, sourceOptions: fast})).equals(reference));
      const [entry] = filesUnder(path.join(cacheDir, "objects"));
      fs.writeFileSync(entry, spoil(fs.readFileSync(entry, "utf8")));

      const warnings = [];
      const before = {...server.counts};
      const out = await fingerprint({model: server.url, cacheDir, sourceOptions: {...fast, onWarning: (m) => warnings.push(m)}});
      assert.ok(out.equals(reference));
      assert.equal(warnings.length, 1, warnings.join("\n"));
      assert.ok(warnings[0].includes(entry) && /unreadable .*dropped/.test(warnings[0]), warnings[0]);
      // Opened again (one HEAD); the pieces, keyed by the object's ETag, were still good.
      assert.deepEqual([server.counts.HEAD - before.HEAD, server.counts.GET - before.GET], [1, 0]);
      // The entry is whole again: the next open needs no request.
      const again = await openSource(server.url, {cacheDir, ...fast, onWarning: (m) => assert.fail(m)});
      assert.equal(again.size, fs.statSync(tiny()).size);
      assert.equal(server.counts.HEAD - before.HEAD, 1);
    });
  }
});

describe("a full disk (ENOSPC)", () => {
  // Writes half the data, then fails as a full disk does, from the nth write on.
  const fullFrom = (nth) => {
    let writes = 0;
    return {
      ...fs.promises,
      async writeFile(file, data) {
        if (++writes < nth) return fs.promises.writeFile(file, data);
        await fs.promises.writeFile(file, typeof data === "string" ? data.slice(0, data.length >> 1) : data.subarray(0, data.length >> 1));
        throw failure("ENOSPC");
      },
    };
  };

  for (const nth of [1, 3, 6]) {
    test(`writes failing from write ${nth} on: the load succeeds, no piece or .tmp file is left, the warning says so`, async () => {
      const cacheDir = path.join(tmp, `full-${nth}`);
      const warnings = [];
      const out = await fingerprint({model: server.url, cacheDir, sourceOptions: {...fast, cacheIo: fullFrom(nth), onWarning: (m) => warnings.push(m)}});
      assert.ok(out.equals(reference));
      const left = filesUnder(cacheDir);
      assert.deepEqual(left.filter((f) => f.endsWith(".tmp")), []);
      // Every piece left is whole: its .bin beside its .sha256, which matches.
      for (const bin of left.filter((f) => f.endsWith(".bin"))) assert.ok(left.includes(bin.replace(/\.bin$/, ".sha256")), bin);
      assert.equal(warnings.length, 1, warnings.join("\n"));
      assert.match(warnings[0], /cannot store .*ENOSPC.*the rest of this load is not cached/);
      // Once there is room again, a load verifies what was stored and stores the rest.
      assert.ok((await fingerprint({model: server.url, cacheDir, sourceOptions: {...fast, onWarning: (m) => assert.fail(m)}})).equals(reference));
      assert.deepEqual(filesUnder(cacheDir).filter((f) => f.endsWith(".tmp")), []);
    });
  }

  test("the source counts the ranges it read but did not store", async () => {
    const source = await openSource(server.url, {...fast, cacheDir: path.join(tmp, "full-stats"), cacheIo: fullFrom(2), onWarning: () => {}});
    await source.read(0, 100);
    await source.read(100, 200);
    assert.deepEqual(source.stats, {hits: 0, misses: 2, discarded: 0, unstored: 2});
  });
});

describe("a cache folder that cannot be written", () => {
  const readOnly = {
    ...fs.promises,
    async mkdir(dir, options) {
      if (fs.existsSync(dir)) return undefined;
      throw failure("EROFS");
    },
    async writeFile() { throw failure("EROFS"); },
  };

  test("read-only and empty: the load goes to the source, and the warning says it is not cached", async () => {
    const cacheDir = path.join(tmp, "ro-empty");
    fs.mkdirSync(path.join(cacheDir, "objects"), {recursive: true});
    const warnings = [];
    const out = await fingerprint({model: server.url, cacheDir, sourceOptions: {...fast, cacheIo: readOnly, onWarning: (m) => warnings.push(m)}});
    assert.ok(out.equals(reference));
    assert.equal(warnings.length, 1, warnings.join("\n"));
    assert.match(warnings[0], /cannot store .*EROFS.*not cached/);
    assert.deepEqual(filesUnder(cacheDir), []);
  });

  test("read-only and filled before: the load is served from it, with no request", async () => {
    const cacheDir = path.join(tmp, "ro-filled");
    assert.ok((await fingerprint({model: server.url, cacheDir, sourceOptions: fast})).equals(reference));
    const before = {...server.counts};
    const out = await fingerprint({model: server.url, cacheDir, sourceOptions: {...fast, cacheIo: readOnly, onWarning: (m) => assert.fail(m)}});
    assert.ok(out.equals(reference));
    assert.deepEqual(server.counts, before);
  });

  test("a cache folder that cannot be made (under a file): the load goes on without a cache, and says so", async () => {
    const file = path.join(tmp, "a-file");
    fs.writeFileSync(file, "");
    const cacheDir = path.join(file, "cache");
    const warnings = [];
    const out = await fingerprint({model: server.url, cacheDir, sourceOptions: {...fast, onWarning: (m) => warnings.push(m)}});
    assert.ok(out.equals(reference));
    assert.equal(warnings.length, 1, warnings.join("\n"));
    assert.ok(warnings[0].includes(cacheDir) && /cannot be used \(ENOTDIR\).*without it/.test(warnings[0]), warnings[0]);
  });

  test("a folder without write permission (file modes; root writes through them)", {skip: process.getuid?.() === 0 && "running as root"}, async () => {
    const cacheDir = path.join(tmp, "ro-mode");
    fs.mkdirSync(cacheDir, {mode: 0o555});
    const warnings = [];
    try {
      const out = await fingerprint({model: server.url, cacheDir, sourceOptions: {...fast, onWarning: (m) => warnings.push(m)}});
      assert.ok(out.equals(reference));
      assert.equal(warnings.length, 1, warnings.join("\n"));
      assert.match(warnings[0], /cannot be used \(EACCES\)/);
    } finally {
      fs.chmodSync(cacheDir, 0o755);
    }
  });
});
