// A model object that changes while a node loads it is an error naming the object
// ('source_changed'), never a node holding ranges of two files: over HTTP with and without an
// ETag (servers that honor the conditions the loader sends and servers that ignore them), across
// a resumed transfer, through the disk cache, for a header read before the node opened, for a
// local file written in place, over the S3 API and through an R2 binding. A server with no
// validator at all is refused unless allowed, and allowed, a sample is read again after the load.
import assert from "node:assert/strict";
import fs from "node:fs";
import http from "node:http";
import {spawn} from "node:child_process";
import os from "node:os";
import path from "node:path";
import {createRequire} from "node:module";
import {after, before, describe, test} from "node:test";

import {readModelHeader} from "../../../js-glue/src/gguf/model_header.js";
import {openSource} from "../../../js-glue/src/sources/open_source.js";
import {gatewayConfigOf, serveConfigOf} from "../support/cli_config.mjs";
import {fingerprint} from "../support/fingerprint.mjs";
import {model, root} from "../support/models.mjs";
import {freePort} from "../support/servers.mjs";

const require = createRequire(path.join(root, "js-glue", "package.json"));
const {AwsClient} = require("aws4fetch");
const S3rver = require("s3rver");

// Two versions of one model: the same shapes and size, other weights (the bytes differ from the
// tensor data on; the first read, the header's, is the whole file).
const v1File = () => model("tiny", "tiny", ["--type", "Q4_0"]);
const v2File = () => model("tiny-seed-2", "tiny", ["--type", "Q4_0", "--seed", "2"]);
const fast = {retries: 4, backoffMs: 5, maxBackoffMs: 20};
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "lf-source-changed-"));


const VERSIONS = [
  {etag: '"v1"', lastModified: "Mon, 01 Jan 2024 00:00:00 GMT"},
  {etag: '"v2"', lastModified: "Tue, 02 Jan 2024 00:00:00 GMT"},
];

// A range server over v1 that switches to v2 after `changeAfter` ranged GETs. etag: "strong",
// "weak" or none; lastModified: sent or not, and `sameLastModified` keeps v1's for v2 (a change
// within the clock's second); honors: which conditions it evaluates ("if-match",
// "if-unmodified-since", "if-range"); truncate: GETs to cut halfway (the connection then closes).
async function startChangingServer({etag, lastModified = false, sameLastModified = false, honors = [], changeAfter = Infinity}) {
  const data = [fs.readFileSync(v1File()), fs.readFileSync(v2File())];
  const state = {version: 0, gets: 0, truncate: 0, requests: [], changeAfter};
  const server = http.createServer((req, res) => {
    const h = req.headers;
    if (req.method === "GET") {
      state.gets++;
      state.requests.push({range: h.range, ifMatch: h["if-match"], ifRange: h["if-range"], ifUnmodifiedSince: h["if-unmodified-since"]});
      if (state.gets >= state.changeAfter) state.version = 1;
    }
    const v = state.version;
    const validators = {};
    if (etag) validators.etag = `${etag === "weak" ? "W/" : ""}${VERSIONS[v].etag}`;
    if (lastModified) validators["last-modified"] = VERSIONS[sameLastModified ? 0 : v].lastModified;
    const body = data[v];
    if (req.method === "HEAD") { res.writeHead(200, {"content-length": body.length, ...validators}).end(); return; }
    if (honors.includes("if-match") && h["if-match"] && h["if-match"] !== validators.etag) { res.writeHead(412).end(); return; }
    if (honors.includes("if-unmodified-since") && h["if-unmodified-since"] &&
        Date.parse(validators["last-modified"]) > Date.parse(h["if-unmodified-since"])) { res.writeHead(412).end(); return; }
    if (honors.includes("if-range") && h["if-range"] && h["if-range"] !== validators.etag) {
      res.writeHead(200, {"content-length": body.length, ...validators}).end(body);
      return;
    }
    const [a, b] = /bytes=(\d+)-(\d+)/.exec(h.range).slice(1).map(Number);
    const part = body.subarray(a, b + 1);
    res.writeHead(206, {"content-length": part.length, "content-range": `bytes ${a}-${b}/${body.length}`, ...validators});
    if (state.truncate > 0) {
      state.truncate--;
      res.write(part.subarray(0, part.length >> 1), () => setTimeout(() => res.socket.destroy(), 10));
      return;
    }
    res.end(part);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${server.address().port}/model.gguf`;
  return {url, state, stop: () => new Promise((r) => server.close(r))};
}

const changedError = (name) => (e) => {
  assert.equal(e.code, "source_changed", e.stack);
  assert.ok(e.message.includes(name), e.message);
  return true;
};

let reference1;
let reference2;
before(async () => {
  reference1 = await fingerprint({model: v1File()});
  reference2 = await fingerprint({model: v2File()});
  assert.ok(!reference1.equals(reference2));
});
after(() => fs.rmSync(tmp, {recursive: true, force: true}));

describe("http: the object changes between the header and the tensors", () => {
  const cases = [
    ["a strong ETag, sent as If-Match (the server answers 412)", {etag: "strong", honors: ["if-match", "if-range"]}],
    ["a strong ETag, sent as If-Range (the server answers 200 with the new object)", {etag: "strong", honors: ["if-range"]}],
    ["a strong ETag, the conditions ignored (the answer's ETag tells)", {etag: "strong"}],
    ["no ETag, Last-Modified sent as If-Unmodified-Since (the server answers 412)", {lastModified: true, honors: ["if-unmodified-since"]}],
    ["no ETag, Last-Modified, the condition ignored (the answer's Last-Modified tells)", {lastModified: true}],
    ["a weak ETag and Last-Modified: If-Unmodified-Since, no If-Match", {etag: "weak", lastModified: true, honors: ["if-match", "if-unmodified-since"]}],
  ];
  for (const [title, options] of cases) {
    test(title, async () => {
      const server = await startChangingServer({...options, changeAfter: 2});
      try {
        await assert.rejects(fingerprint({model: server.url, sourceOptions: fast}), changedError(server.url));
        const [first] = server.state.requests;
        if (options.etag === "strong") {
          assert.equal(first.ifMatch, '"v1"');
          assert.equal(first.ifRange, '"v1"');
        } else {
          assert.equal(first.ifMatch, undefined, "If-Match with a weak ETag always fails");
          assert.equal(first.ifUnmodifiedSince, VERSIONS[0].lastModified);
        }
      } finally {
        await server.stop();
      }
    });
  }

  test("with the same validators and no change, the node loads as from the local file", async () => {
    for (const options of cases.map(([, o]) => o)) {
      const server = await startChangingServer(options);
      try {
        assert.ok((await fingerprint({model: server.url, sourceOptions: fast})).equals(reference1));
      } finally {
        await server.stop();
      }
    }
  });
});

describe("http without any validator: refused unless allowed; allowed, a resumed transfer and a sample read again are compared", () => {
  test("not allowed: unvalidated_source naming the URL and why, from openSource, LayerNode.open and the CLI", async () => {
    const server = await startChangingServer({});
    try {
      const refused = (e) => {
        assert.equal(e.code, "unvalidated_source", e.stack);
        assert.ok(e.message.startsWith(`${server.url}: the server sends neither ETag nor Last-Modified`), e.message);
        assert.match(e.message, /could mix two versions' weights: refused .*--allow-unvalidated-source/);
        return true;
      };
      await assert.rejects(openSource(server.url, fast), refused);
      await assert.rejects(fingerprint({model: server.url, sourceOptions: fast}), refused);
      const cli = path.join(root, "js-glue", "bin", "layerfold.js");
      const run = (...extra) => new Promise((resolve) => {
        const child = spawn(process.execPath, [cli, "validate", "--model", server.url, "--top-k", "3", "--json", ...extra], {stdio: ["ignore", "pipe", "pipe"]});
        let stderr = "";
        child.stderr.on("data", (d) => { stderr += d; });
        const timer = setTimeout(() => child.kill(), 120_000);
        child.on("close", (status) => { clearTimeout(timer); resolve({status, stderr}); });
      });
      const no = await run("--cache-dir", path.join(tmp, "cli-cache-refused"));
      assert.equal(no.status, 2, no.stderr);
      assert.match(no.stderr, /the server sends neither ETag nor Last-Modified.*refused/);
      assert.deepEqual(fs.readdirSync(path.join(tmp, "cli-cache-refused"), {recursive: true}).filter((f) => /\.(bin|json)$/.test(f)), [], "the cache kept nothing of it");
      const yes = await run("--allow-unvalidated-source", "--cache-dir", path.join(tmp, "cli-cache"));
      assert.equal(yes.status, 0, yes.stderr);
      assert.match(yes.stderr, /neither ETag nor Last-Modified; loading it as allowUnvalidatedSource/);
    } finally {
      await server.stop();
    }
  });

  test("allowed by a command's flag or LAYERFOLD_ALLOW_UNVALIDATED_SOURCE=1; another value of the variable is refused by name", async () => {
    for (const config of [(v, env) => serveConfigOf({model: "m", ...v}, env), (v, env) => gatewayConfigOf({model: "m", ...v}, env)]) {
      assert.equal((await config({}, {})).allowUnvalidatedSource, false);
      assert.equal((await config({"allow-unvalidated-source": true}, {})).allowUnvalidatedSource, true);
      assert.equal((await config({}, {LAYERFOLD_ALLOW_UNVALIDATED_SOURCE: "1"})).allowUnvalidatedSource, true);
      assert.equal((await config({}, {LAYERFOLD_ALLOW_UNVALIDATED_SOURCE: "0"})).allowUnvalidatedSource, false);
      await assert.rejects(async () => config({}, {LAYERFOLD_ALLOW_UNVALIDATED_SOURCE: "yes"}), /LAYERFOLD_ALLOW_UNVALIDATED_SOURCE must be 1 \(or 0, or unset\), got "yes"/);
    }
  });

  test("allowed: the warning says what is checked and what is not, and an unchanged object loads as the local file", async () => {
    const server = await startChangingServer({});
    try {
      const warnings = [];
      const out = await fingerprint({model: server.url, allowUnvalidatedSource: true, sourceOptions: {...fast, onWarning: (m) => warnings.push(m)}});
      assert.ok(out.equals(reference1));
      assert.equal(warnings.length, 1, warnings.join("\n"));
      assert.match(warnings[0], new RegExp(`^${server.url.replace(/[.]/g, "\\.")}: the server sends neither ETag nor Last-Modified`));
      assert.match(warnings[0], /Checked: the object's size in every answer, the bytes asked for again when a transfer resumes, and, once a layer node has read its tensors, 1048576 bytes at three places read again/);
      assert.match(warnings[0], /Not checked: every other byte/);
    } finally {
      await server.stop();
    }
  });

  test("allowed, the object replaced by another of the same size after the first tensor: source_changed, not a mix", async () => {
    for (const changeAfter of [3, 6]) {
      const server = await startChangingServer({changeAfter});
      try {
        await assert.rejects(fingerprint({model: server.url, allowUnvalidatedSource: true, sourceOptions: {...fast, onWarning: () => {}}}), (e) => {
          changedError(server.url)(e);
          assert.match(e.message, /read again at the end of the load, differs from the one loaded/);
          return true;
        });
        assert.ok(server.state.version === 1 && server.state.gets > changeAfter, `${server.state.gets} GETs`);
      } finally {
        await server.stop();
      }
    }
  });

  test("the object changes while a transfer is cut: source_changed", async () => {
    const server = await startChangingServer({});
    try {
      const source = await openSource(server.url, {...fast, allowUnvalidatedSource: true, onWarning: () => {}});
      assert.equal(source.validator, "size");
      server.state.truncate = 1;
      server.state.changeAfter = 2;  // the resumed request gets v2
      await assert.rejects(source.read(0, source.size), changedError(server.url));
    } finally {
      await server.stop();
    }
  });

  test("unchanged, the resumed transfer starts 64 KiB before the byte reached and the bytes are right", async () => {
    const server = await startChangingServer({});
    try {
      const source = await openSource(server.url, {...fast, allowUnvalidatedSource: true, onWarning: () => {}});
      server.state.truncate = 1;
      const got = await source.read(0, source.size);
      assert.ok(Buffer.from(got).equals(fs.readFileSync(v1File())));
      const half = source.size >> 1;
      assert.deepEqual(server.state.requests.map((r) => r.range), [`bytes=0-${source.size - 1}`, `bytes=${half - 65536}-${source.size - 1}`]);
    } finally {
      await server.stop();
    }
  });
});

describe("disk cache: a later read from the cache is compared with the object", () => {
  // Cached v1 with some tensor pieces gone (evicted), then v2 behind the same validators: the
  // probe (the sha256 of the first range fetched) tells, the stale copy is dropped and the node
  // loads v2 whole, not v1's cached ranges with v2's missing ones.
  test("no ETag, the same size and Last-Modified: the node loads the new version, not a mix", async () => {
    const server = await startChangingServer({lastModified: true, sameLastModified: true, honors: ["if-unmodified-since"]});
    try {
      const cacheDir = path.join(tmp, "cache-probe");
      assert.ok((await fingerprint({model: server.url, cacheDir, sourceOptions: fast})).equals(reference1));
      const piecesRoot = path.join(cacheDir, "pieces");
      const bins = fs.readdirSync(piecesRoot, {recursive: true}).filter((f) => f.endsWith(".bin"));
      const [header, ...tensors] = bins.sort((a, b) => Number(path.basename(a).split("-")[0]) - Number(path.basename(b).split("-")[0]));
      assert.match(path.basename(header), /^0-/);
      for (const piece of tensors.slice(tensors.length >> 1)) fs.rmSync(path.join(piecesRoot, piece));

      server.state.version = 1;
      const warnings = [];
      const out = await fingerprint({model: server.url, cacheDir, sourceOptions: {...fast, onWarning: (m) => warnings.push(m)}});
      assert.ok(out.equals(reference2), "the node holds v2 whole");
      assert.match(warnings.join("\n"), /changed since it was cached .*the cached copy is dropped/);
    } finally {
      await server.stop();
    }
  });

  test("a strong ETag: pieces are trusted by it, no probe read", async () => {
    const server = await startChangingServer({etag: "strong", honors: ["if-match"]});
    try {
      const cacheDir = path.join(tmp, "cache-etag");
      const source = await openSource(server.url, {cacheDir, ...fast});
      await source.read(0, 1000);
      await source.close();
      const again = await openSource(server.url, {cacheDir, ...fast});
      const before = server.state.gets;
      await again.read(1000, 2000);
      assert.equal(server.state.gets - before, 1);
    } finally {
      await server.stop();
    }
  });
});

describe("a header read before the node opened (a pipeline's)", () => {
  test("handed to a node whose source is now another version: source_changed before any tensor is read", async () => {
    const server = await startChangingServer({etag: "strong", honors: ["if-match"]});
    try {
      const header = await readModelHeader(server.url, fast);
      server.state.version = 1;
      const before = server.state.gets;
      await assert.rejects(fingerprint({model: server.url, header, sourceOptions: fast}), changedError(server.url));
      assert.equal(server.state.gets, before);
    } finally {
      await server.stop();
    }
  });
});

describe("a local file written in place during the load", () => {
  test("a read after the write is source_changed", async () => {
    const file = path.join(tmp, "local.gguf");
    fs.copyFileSync(v1File(), file);
    const source = await openSource(file);
    await source.read(0, 100);
    const fd = fs.openSync(file, "r+");
    fs.writeSync(fd, fs.readFileSync(v2File()), 0, source.size, 0);
    fs.futimesSync(fd, new Date(), new Date(Date.now() + 5000));
    fs.closeSync(fd);
    await assert.rejects(source.read(100, 200), changedError(file));
    await source.close();
  });
});

describe("s3", () => {
  const credentials = {accessKeyId: "S3RVER", secretAccessKey: "S3RVER"};

  test("s3rver: the object is put again between two reads: source_changed naming the s3:// URL", async () => {
    const s3 = new S3rver({address: "127.0.0.1", port: await freePort(), silent: true, directory: path.join(tmp, "s3"),
      configureBuckets: [{name: "models"}]});
    const {address, port} = await s3.run();
    const endpoint = `http://${address}:${port}`;
    try {
      const client = new AwsClient({...credentials, region: "auto", service: "s3"});
      const put = (file) => client.fetch(`${endpoint}/models/tiny.gguf`, {method: "PUT", body: fs.readFileSync(file)});
      assert.equal((await put(v1File())).status, 200);
      const url = "s3://models/tiny.gguf";
      const source = await openSource(url, {...fast, endpoint, ...credentials});
      assert.equal(source.validator, "etag");
      await source.read(0, 100);
      assert.equal((await put(v2File())).status, 200);
      await assert.rejects(source.read(40000, 40100), changedError(url));
    } finally {
      await s3.close();
    }
  });

  // An S3 gateway that evaluates If-Match (as S3 and R2 do) and sends no ETag on ranged answers:
  // the condition, signed with the request, is what tells.
  test("If-Match is sent and signed; the 412 of a gateway is source_changed", async () => {
    const data = [fs.readFileSync(v1File()), fs.readFileSync(v2File())];
    const state = {version: 0, signedIfMatch: []};
    const server = http.createServer((req, res) => {
      const etag = `"e${state.version}"`;
      if (req.method === "HEAD") { res.writeHead(200, {"content-length": data[0].length, etag}).end(); return; }
      state.signedIfMatch.push(/SignedHeaders=[^,]*if-match/.test(req.headers.authorization ?? ""));
      if (req.headers["if-match"] !== etag) { res.writeHead(412).end(); return; }
      const [a, b] = /bytes=(\d+)-(\d+)/.exec(req.headers.range).slice(1).map(Number);
      res.writeHead(206, {"content-range": `bytes ${a}-${b}/${data[0].length}`}).end(data[state.version].subarray(a, b + 1));
    });
    await new Promise((r) => server.listen(0, "127.0.0.1", r));
    try {
      const url = "r2://models/tiny.gguf";
      const source = await openSource(url, {...fast, endpoint: `http://127.0.0.1:${server.address().port}`, ...credentials});
      await source.read(0, 100);
      state.version = 1;
      await assert.rejects(source.read(40000, 40100), changedError(url));
      assert.deepEqual(state.signedIfMatch, [true, true]);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });
});

describe("R2 binding", () => {
  // As the Workers binding does: a get whose onlyIf fails returns the object's metadata without a
  // body. This one sends no etag with the body, so only the condition can tell.
  test("the object is put again between two reads: onlyIf.etagMatches fails, source_changed", async () => {
    const data = [fs.readFileSync(v1File()), fs.readFileSync(v2File())];
    const state = {version: 0};
    const bucket = {
      async head() { return {size: data[0].length, etag: `e${state.version}`}; },
      async get(key, {range, onlyIf}) {
        if (onlyIf?.etagMatches !== undefined && onlyIf.etagMatches !== `e${state.version}`) return {size: data[0].length};
        const bytes = data[state.version].subarray(range.offset, range.offset + range.length);
        return {arrayBuffer: async () => bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length)};
      },
    };
    const source = await openSource({bucket, key: "tiny.gguf"});
    await source.read(0, 100);
    state.version = 1;
    await assert.rejects(source.read(40000, 40100), changedError("r2-binding:tiny.gguf"));
  });
});
