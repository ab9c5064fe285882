// Object sources against real servers on loopback: nginx (plain HTTPS-style range reads), s3rver
// (the S3 API with SigV4), a fault-injecting node:http server, and the verified disk cache.
// A node loaded over the network must compute exactly what the node loaded from disk computes.
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import {createRequire} from "node:module";
import {after, before, describe, test} from "node:test";

import {LayerNode} from "../../../js-glue/src/node/layer_node.js";
import {readModelHeader} from "../../../js-glue/src/gguf/model_header.js";
import {openSource} from "../../../js-glue/src/sources/open_source.js";
import {fingerprint, fingerprintWith} from "../support/fingerprint.mjs";
import {model, root} from "../support/models.mjs";
import {freePort, startNginx} from "../support/servers.mjs";
import {sleep, until} from "../support/wait.mjs";

// The test's own dependencies live with the package's.
const require = createRequire(path.join(root, "js-glue", "package.json"));
const {AwsClient} = require("aws4fetch");
const S3rver = require("s3rver");

const tiny = () => model("tiny", "tiny", ["--type", "Q4_0"]);
// Over 1 MiB, so the header's first read (1 MiB) is not the whole file.
const deep = () => model("tiny-6-wide-layers-q4", "tiny", ["--type", "Q4_0", "--n-layer", "6", "--n-embd", "256", "--n-ff", "1024"]);
const fast = {retries: 4, backoffMs: 5, maxBackoffMs: 20};
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "lf-object-source-"));

// Range-serving node:http server with scripted faults, each a count of requests to spoil: fail500,
// truncate (half the body, then the connection closes), stall (64 bytes, then silence); and 404
// for anything but /model.gguf.
async function startFaultServer(file) {
  const data = fs.readFileSync(file);
  const state = {requests: 0, fail500: 0, truncate: 0, stall: 0, rangeStarts: []};
  const server = http.createServer((req, res) => {
    state.requests++;
    if (req.url !== "/model.gguf") { res.writeHead(404).end(); return; }
    if (state.fail500 > 0) { state.fail500--; res.writeHead(500).end(); return; }
    if (req.method === "HEAD") { res.writeHead(200, {"content-length": data.length, etag: '"v1"'}).end(); return; }
    const [a, b] = /bytes=(\d+)-(\d+)/.exec(req.headers.range).slice(1).map(Number);
    state.rangeStarts.push(a);
    const body = data.subarray(a, b + 1);
    res.writeHead(206, {"content-length": body.length, "content-range": `bytes ${a}-${b}/${data.length}`, etag: '"v1"'});
    if (state.stall > 0 && body.length > 64) {
      state.stall--;
      res.write(body.subarray(0, 64));
      return;
    }
    if (state.truncate > 0 && body.length > 64) {
      state.truncate--;
      res.write(body.subarray(0, body.length >> 1), () => setTimeout(() => res.socket.destroy(), 10));
      return;
    }
    res.end(body);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {url: `http://127.0.0.1:${server.address().port}`, state, stop: () => new Promise((r) => server.close(r))};
}

// Runs fn with environment variables set (undefined: unset), then restores them.
async function withEnv(vars, fn) {
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  const apply = (values) => {
    for (const [k, v] of Object.entries(values)) if (v === undefined) delete process.env[k]; else process.env[k] = v;
  };
  apply(vars);
  try {
    return await fn();
  } finally {
    apply(saved);
  }
}


// The same, computed by a fresh node process (a restart).
function fingerprintInNewProcess(options) {
  const script = `import {LayerNode} from ${JSON.stringify(path.join(root, "js-glue", "src", "node", "layer_node.js"))};
    ${fingerprintWith}
    process.stdout.write((await fingerprintWith(LayerNode, ${JSON.stringify(options)})).toString("hex"));`;
  const r = spawnSync(process.execPath, ["--input-type=module", "-e", script], {encoding: "utf8"});
  assert.equal(r.status, 0, r.stderr);
  return Buffer.from(r.stdout, "hex");
}

let nginx;
let faults;
let reference;
const modelDir = path.join(tmp, "www");

before(async () => {
  // tmp is private (mkdtemp makes it 0700), as a checkout in /root is: nginx serves it all the same.
  fs.mkdirSync(modelDir);
  fs.copyFileSync(tiny(), path.join(modelDir, "tiny.gguf"));
  fs.copyFileSync(deep(), path.join(modelDir, "deep.gguf"));
  reference = await fingerprint({model: tiny()});
  nginx = await startNginx(modelDir, tmp);
  faults = await startFaultServer(tiny());
});

after(async () => {
  await nginx?.stop();
  await faults?.stop();
  fs.rmSync(tmp, {recursive: true, force: true});
});

describe("http source (nginx)", () => {
  test("a node loaded over http computes the same bytes as from the local path", async () => {
    const out = await fingerprint({model: `${nginx.url}/tiny.gguf`});
    assert.ok(out.equals(reference));
    assert.ok(nginx.entries().some((e) => e.status === 206));
  });

  test("a middle node (layers [1, 2) of 6) transfers its tensors and the header reads, not the whole file", async () => {
    const file = deep();
    const size = fs.statSync(file).size;
    const before = nginx.entries().length;
    const node = await LayerNode.open({model: `${nginx.url}/deep.gguf`, layers: [1, 2], build: "single"});
    const tensorBytes = node.bytesLoaded;
    node.close();
    const {info, tensors, data_offset: dataOffset} = await readModelHeader(file);
    assert.equal(info.n_layer, 6);
    // The node placed its layer's tensors (and at most a few small shared ones), nothing else.
    const layerBytes = tensors.filter((t) => t.name.startsWith("blk.1.")).reduce((sum, t) => sum + t.n_bytes, 0);
    assert.ok(tensorBytes >= layerBytes && tensorBytes < layerBytes + 4096, `${tensorBytes} tensor bytes for a ${layerBytes}-byte layer`);
    const served = nginx.entries().slice(before).reduce((sum, e) => sum + e.bytes, 0);
    assert.ok(size > 1 << 20);
    // One header read (the first 1 MiB holds this header), then the tensors.
    assert.ok(dataOffset <= 1 << 20);
    assert.equal(served, tensorBytes + Math.min(size, 1 << 20));
    assert.ok(served < size, `${served} bytes served of a ${size}-byte file`);
  });

  test("nginx serves a tree under a private (0700) folder: 200 for a file, 404 for a missing one", async () => {
    assert.equal(fs.statSync(tmp).mode & 0o777, 0o700);
    assert.equal((await fetch(`${nginx.url}/tiny.gguf`, {method: "HEAD"})).status, 200);
    assert.equal((await fetch(`${nginx.url}/no/such/model.gguf`)).status, 404);
  });

  test("a missing object fails at once with an error naming the URL and the status", async () => {
    const url = `${nginx.url}/absent.gguf`;
    const before = nginx.entries().length;
    await assert.rejects(openSource(url, fast), (e) => e.code === "not_found" && e.message.includes(url) && e.message.includes("404"));
    // Counted by status: nginx may still be logging the previous test's last range; and it logs a
    // request after answering it, so the line may come a moment after the error.
    const notFound = () => nginx.entries().slice(before).filter((e) => e.status === 404).length;
    await until(() => notFound() > 0, "nginx to log the 404");
    await sleep(100);
    assert.equal(notFound(), 1, "a 404 is not retried");
  });
});

describe("faults (node:http)", () => {
  test("two 500s then success: the load succeeds after retries", async () => {
    faults.state.fail500 = 2;
    const source = await openSource(`${faults.url}/model.gguf`, fast);
    assert.equal(source.stats.retries, 2);
    assert.equal(faults.state.fail500, 0);
    assert.ok((await fingerprint({model: `${faults.url}/model.gguf`, sourceOptions: fast})).equals(reference));
  });

  test("a truncated body is resumed from the byte reached", async () => {
    const data = fs.readFileSync(tiny());
    const source = await openSource(`${faults.url}/model.gguf`, fast);
    faults.state.truncate = 1;
    const got = await source.read(100, data.length);
    assert.ok(Buffer.from(got).equals(data.subarray(100)));
    assert.equal(source.stats.retries, 1);
    assert.deepEqual(faults.state.rangeStarts.slice(-2), [100, 100 + ((data.length - 100) >> 1)]);
  });

  test("a stalled body times out and the read resumes after the bytes received", async () => {
    const data = fs.readFileSync(tiny());
    const source = await openSource(`${faults.url}/model.gguf`, {...fast, timeoutMs: 200});
    faults.state.stall = 1;
    const got = await source.read(1000, 9000);
    assert.ok(Buffer.from(got).equals(data.subarray(1000, 9000)));
    assert.equal(source.stats.retries, 1);
    assert.deepEqual(faults.state.rangeStarts.slice(-2), [1000, 1064]);
  });

  test("a server ignoring Range is an error, not silent garbage", async () => {
    const server = http.createServer((req, res) => res.writeHead(200, {"content-length": 1000}).end(Buffer.alloc(1000)));
    await new Promise((r) => server.listen(0, "127.0.0.1", r));
    try {
      const source = await openSource(`http://127.0.0.1:${server.address().port}/m.gguf`, {...fast, allowUnvalidatedSource: true, onWarning: () => {}});
      await assert.rejects(source.read(10, 20), (e) => e.code === "range_ignored");
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  test("a refused connection is retried, then reported against the URL", async () => {
    const url = `http://127.0.0.1:${await freePort()}/model.gguf`;
    const retried = [];
    await assert.rejects(openSource(url, {...fast, retries: 2, onRetry: (e, n) => retried.push(n)}),
      (e) => e.code === "network" && e.message.startsWith(url));
    assert.deepEqual(retried, [1, 2]);
  });

  test("404 fails at once, naming the URL", async () => {
    const url = `${faults.url}/missing.gguf`;
    const before = faults.state.requests;
    await assert.rejects(openSource(url, fast), (e) => e.code === "not_found" && e.message.includes(url));
    assert.equal(faults.state.requests - before, 1);
  });
});

describe("disk cache", () => {
  test("a second load (as after a restart) makes no request; a corrupt piece is refetched", async () => {
    const cacheDir = path.join(tmp, "cache");
    const url = `${nginx.url}/tiny.gguf`;
    const first = await fingerprint({model: url, cacheDir});
    assert.ok(first.equals(reference));
    const before = nginx.entries().length;
    assert.ok(fingerprintInNewProcess({model: url, cacheDir}).equals(reference));
    assert.equal(nginx.entries().length, before, "cached load touched the network");

    const pieces = fs.readdirSync(path.join(cacheDir, "pieces"), {recursive: true}).filter((f) => f.endsWith(".bin"));
    const victim = path.join(cacheDir, "pieces", pieces.sort((a, b) => fs.statSync(path.join(cacheDir, "pieces", b)).size - fs.statSync(path.join(cacheDir, "pieces", a)).size)[0]);
    const bytes = fs.readFileSync(victim);
    bytes[bytes.length >> 1] ^= 0x40;
    fs.writeFileSync(victim, bytes);
    assert.ok((await fingerprint({model: url, cacheDir})).equals(reference));
    const refetched = nginx.entries().slice(before).filter((e) => e.method === "GET");
    assert.equal(refetched.length, 1, "exactly the corrupt piece is fetched again");
  });

  test("least recently used pieces are evicted past maxCacheBytes", async () => {
    const cacheDir = path.join(tmp, "cache-small");
    const source = await openSource(`${nginx.url}/tiny.gguf`, {cacheDir, maxCacheBytes: 3000});
    await source.read(0, 1000);
    await source.read(1000, 2000);
    await source.read(0, 1000);
    await source.read(2000, 3500);
    const left = fs.readdirSync(path.join(cacheDir, "pieces"), {recursive: true}).filter((f) => f.endsWith(".bin")).map((f) => path.basename(f)).sort();
    assert.deepEqual(left, ["0-1000.bin", "2000-3500.bin"]);
  });

  test("progress reports reach the total", async () => {
    const reports = [];
    const source = await openSource(`${nginx.url}/tiny.gguf`, {onProgress: (p) => reports.push(p)});
    await source.read(0, source.size);
    assert.equal(reports.at(-1).bytes, source.size);
    assert.equal(reports.at(-1).totalBytes, source.size);
    assert.equal(reports.at(-1).etaSeconds, 0);
  });
});

describe("s3 source (s3rver)", () => {
  const credentials = {accessKeyId: "S3RVER", secretAccessKey: "S3RVER"};
  let s3;
  let endpoint;

  before(async () => {
    s3 = new S3rver({address: "127.0.0.1", port: await freePort(), silent: true, directory: path.join(tmp, "s3"),
      configureBuckets: [{name: "models"}]});
    const {address, port} = await s3.run();
    endpoint = `http://${address}:${port}`;
    const client = new AwsClient({...credentials, region: "auto", service: "s3"});
    const put = await client.fetch(`${endpoint}/models/gemma/tiny.gguf`, {method: "PUT", body: fs.readFileSync(tiny())});
    assert.equal(put.status, 200);
  });

  after(async () => {
    await s3?.close();
  });

  test("a node loaded over s3:// and r2:// computes the same bytes as from the local path", async () => {
    for (const scheme of ["s3", "r2"]) {
      const out = await fingerprint({model: `${scheme}://models/gemma/tiny.gguf`, sourceOptions: {...fast, endpoint, ...credentials}});
      assert.ok(out.equals(reference), scheme);
    }
  });

  test("credentials and endpoint come from the environment", async () => {
    const vars = {S3_ENDPOINT: undefined, AWS_ACCESS_KEY_ID: undefined, AWS_SECRET_ACCESS_KEY: undefined,
      R2_ENDPOINT: endpoint, R2_ACCESS_KEY_ID: "S3RVER", R2_SECRET_ACCESS_KEY: "S3RVER"};
    await withEnv(vars, async () => {
      const source = await openSource("r2://models/gemma/tiny.gguf", fast);
      assert.equal(source.size, fs.statSync(tiny()).size);
      assert.ok(Buffer.from(await source.read(0, 4)).equals(Buffer.from("GGUF")));
    });
  });

  // s3rver checks the access key id but does not verify SigV4 signatures, so a wrong key id is
  // the credential error it can produce.
  test("an unknown access key fails at once with a clear error and no secret in it", async () => {
    const secretAccessKey = "not-the-secret-123";
    const url = "s3://models/gemma/tiny.gguf";
    await assert.rejects(openSource(url, {...fast, endpoint, accessKeyId: "WRONG", secretAccessKey}),
      (e) => e.code === "unauthorized" && e.status === 403 && e.message.includes(url) && !e.message.includes(secretAccessKey));
  });

  test("missing credentials are named", async () => {
    const vars = {AWS_ACCESS_KEY_ID: undefined, R2_ACCESS_KEY_ID: undefined, AWS_SECRET_ACCESS_KEY: undefined, R2_SECRET_ACCESS_KEY: undefined};
    await withEnv(vars, () => assert.rejects(openSource("s3://models/x.gguf", {endpoint}),
      (e) => e.code === "no_credentials" && /accessKeyId, secretAccessKey/.test(e.message)));
  });
});

describe("Workers R2 binding source", () => {
  // The binding is an in-process API of the Workers runtime: here, one over the model file.
  function binding(file, {streamBody}) {
    const data = fs.readFileSync(file);
    const calls = [];
    return {
      calls,
      async head(key) { return key === "tiny.gguf" ? {size: data.length, etag: "e1"} : null; },
      async get(key, {range}) {
        calls.push(range);
        const bytes = data.subarray(range.offset, range.offset + range.length);
        return streamBody ? {etag: "e1", body: ReadableStream.from([bytes.subarray(0, 7), bytes.subarray(7)])}
          : {etag: "e1", arrayBuffer: async () => bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length)};
      },
    };
  }

  test("a node loaded through the binding (body stream or arrayBuffer) computes the same bytes", async () => {
    for (const streamBody of [true, false]) {
      const bucket = binding(tiny(), {streamBody});
      assert.ok((await fingerprint({model: {bucket, key: "tiny.gguf"}})).equals(reference));
      assert.ok(bucket.calls.length > 2 && bucket.calls.every((r) => r.length > 0));
    }
  });

  test("a missing key is not_found", async () => {
    await assert.rejects(openSource({bucket: binding(tiny(), {streamBody: false}), key: "nope.gguf"}), (e) => e.code === "not_found");
  });
});
