// The first node of an E-model reads only the rows of per_layer_token_embd for the tokens it
// sees, by range from its object source, cached (node/per_layer_rows.js), instead of holding the
// table: the same logits bytes as a node holding it, only the seen rows read (a cached row never
// again, adjacent ids in one read), through a local file, an R2 binding and the edge node, and a
// memory estimate (the node's and `layerfold plan`'s) without the table. Over HTTPS the verified
// disk cache keeps the rows read, like any range.
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import {describe, test} from "node:test";

import {openEdgeNode} from "../../../js-glue/edge/edge_node.js";
import {readModelHeader} from "../../../js-glue/src/gguf/model_header.js";
import {LayerNode} from "../../../js-glue/src/node/layer_node.js";
import {Pipeline} from "../../../js-glue/src/pipeline/pipeline.js";
import {openSource} from "../../../js-glue/src/sources/open_source.js";
import {model, root} from "../support/models.mjs";

const sharedKv2 = () => model("tiny-shared-kv2-q8", "tiny-shared-kv2", ["--type", "Q8_0"]);
const e2b = () => model("e2b-shape", "e2b-shape", ["--type", "Q8_0"]);
const argmax = (logits) => logits.reduce((best, x, i) => (x > logits[best] ? i : best), 0);
const bytesOf = (floats) => Buffer.from(floats.buffer, floats.byteOffset, floats.byteLength);
const cli = path.join(root, "js-glue", "bin", "layerfold.js");

async function table(file) {
  const header = await readModelHeader(file);
  const t = header.tensors.find((x) => x.name === "per_layer_token_embd.weight");
  return {offset: t.offset, bytes: t.n_bytes, rowBytes: t.n_bytes / header.info.n_vocab, nVocab: header.info.n_vocab};
}

// A source over the file that records every range read.
async function countingSource(file) {
  const source = await openSource(file);
  const reads = [];
  return {reads, name: source.name, size: source.size, identity: source.identity, validator: source.validator,
    close: () => source.close(),
    read: (s, e) => { reads.push([s, e]); return source.read(s, e); },
    readInto: (s, e, t) => { reads.push([s, e]); return source.readInto(s, e, t); }};
}

// An R2 binding over the file (the Workers runtime's in-process API), recording each get's range.
function r2Binding(file, key) {
  const size = fs.statSync(file).size;
  const ranges = [];
  return {ranges,
    async head(k) { return k === key ? {size, etag: "e1"} : null; },
    async get(k, {range}) {
      ranges.push([range.offset, range.offset + range.length]);
      const bytes = Buffer.alloc(range.length);
      const fd = fs.openSync(file, "r");
      try {
        fs.readSync(fd, bytes, 0, range.length, range.offset);
      } finally {
        fs.closeSync(fd);
      }
      return {etag: "e1", body: ReadableStream.from([new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length)])};
    }};
}

// An HTTP server of the file's ranges (strong ETag), recording each GET's range.
async function rangeServer(file) {
  const size = fs.statSync(file).size;
  const ranges = [];
  const server = http.createServer((req, res) => {
    if (req.method === "HEAD") return res.writeHead(200, {"content-length": size, etag: '"v1"'}).end();
    const [a, b] = /bytes=(\d+)-(\d+)/.exec(req.headers.range).slice(1).map(Number);
    ranges.push([a, b + 1]);
    const body = Buffer.alloc(b + 1 - a);
    const fd = fs.openSync(file, "r");
    fs.readSync(fd, body, 0, body.length, a);
    fs.closeSync(fd);
    res.writeHead(206, {"content-length": body.length, "content-range": `bytes ${a}-${b}/${size}`, etag: '"v1"'}).end(body);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {url: `http://127.0.0.1:${server.address().port}/m.gguf`, ranges, stop: () => new Promise((r) => server.close(r))};
}

// Ranges [start, end) of the table's rows [first, last].
const rowRange = (t, first, last) => [t.offset + first * t.rowBytes, t.offset + (last + 1) * t.rowBytes];
const inTable = (t) => ([s, e]) => s < t.offset + t.bytes && e > t.offset;

// A prompt longer than the window of 4, then greedy steps: each step's logits.
async function greedyLogits(pipeline, steps = 4) {
  const out = [];
  let tokens = [2, 17, 300, 5, 41, 88, 9, 120];
  for (let s = 0; s < steps; s++) {
    const {logits} = await pipeline.step("chat", tokens);
    out.push(Buffer.from(bytesOf(logits)));
    tokens = [argmax(logits)];
  }
  return out;
}

describe("per-layer embedding rows read by range", () => {
  test("a pipeline whose first node never loads the table gives the logits bytes of one holding it", async () => {
    const whole = await Pipeline.open({model: sharedKv2(), build: "single", perLayerTable: "whole"});
    const rows = await Pipeline.open({model: sharedKv2(), build: "single"});
    const split = await Pipeline.open({model: sharedKv2(), nodes: "local:0-0,local:1-4", build: "single", perLayerRowCacheBytes: 0});
    try {
      const expected = await greedyLogits(whole);
      for (const [name, p] of [["rows", rows], ["rows, split, no cache", split]]) {
        const got = await greedyLogits(p);
        for (const [i, e] of expected.entries()) assert.ok(got[i].equals(e), `${name}: step ${i}: logits differ`);
      }
    } finally {
      await whole.close();
      await rows.close();
      await split.close();
    }
  });

  test("only the seen tokens' rows are read, adjacent ids in one read, cached rows never again", async () => {
    const file = e2b();
    const t = await table(file);
    const source = await countingSource(file);
    const node = await LayerNode.open({model: file, source, layers: [0, 1], build: "single", perLayerRowCacheBytes: 3 * t.rowBytes});
    const whole = await LayerNode.open({model: file, layers: [0, 1], build: "single", perLayerTable: "whole"});
    try {
      assert.deepEqual(source.reads.filter(inTable(t)), [], "the load read the table");
      assert.equal(whole.info().bytesLoaded - node.info().bytesLoaded, t.bytes);
      const loadReads = source.reads.length;
      const call = async (tokens) => {
        const hidden = node.embed(tokens);
        const got = await node.perLayerInputs(tokens, hidden);
        assert.ok(bytesOf(got).equals(bytesOf(await whole.perLayerInputs(tokens, whole.embed(tokens)))), `inputs of ${tokens} differ`);
        const reads = source.reads.splice(loadReads);
        return reads;
      };
      // 5, 6, 7 are one run; 100 another; the repeated 5 is one row.
      assert.deepEqual(await call([7, 100, 5, 6, 5]), [rowRange(t, 5, 7), rowRange(t, 100, 100)]);
      // The cache holds 3 rows: 6, 7 and 100 (100 evicted 5, the least recently used).
      assert.deepEqual(await call([6, 7, 100]), []);
      assert.deepEqual(await call([101]), [rowRange(t, 101, 101)]);
      assert.deepEqual(await call([5]), [rowRange(t, 5, 5)]);
      assert.deepEqual(await call([t.nVocab - 1, 0]), [rowRange(t, 0, 0), rowRange(t, t.nVocab - 1, t.nVocab - 1)]);
      const stats = node.perLayerRowStats();
      assert.equal(stats.rowBytes, t.rowBytes);
      assert.equal(stats.cachedBytes, 3 * t.rowBytes);
      assert.equal(stats.rowsRead, 8);
      assert.equal(stats.cacheHits, 3);
      assert.equal(whole.perLayerRowStats(), null);
      await assert.rejects(node.perLayerInputs([t.nVocab], new Float32Array(node.nEmbd)),
        new RegExp(`token id ${t.nVocab} at position 0 is outside \\[0, ${t.nVocab}\\)`));
    } finally {
      node.close();
      whole.close();
    }
  });

  test("an edge node reads its rows from the R2 binding, never the table", async () => {
    const file = e2b();
    const t = await table(file);
    const bucket = r2Binding(file, "m.gguf");
    const module = await WebAssembly.compile(fs.readFileSync(path.join(root, "js-glue", "dist", "layerfold_wasi.wasm")));
    const node = await openEdgeNode({module, bucket, key: "m.gguf", layers: [0, 1]});
    const whole = await LayerNode.open({model: file, layers: [0, 1], build: "single", perLayerTable: "whole"});
    try {
      assert.deepEqual(bucket.ranges.filter(inTable(t)), []);
      const tokens = [2, t.nVocab - 1, 3];
      const got = await node.perLayerInputs(tokens, node.embed(tokens));
      assert.ok(bytesOf(got).equals(bytesOf(await whole.perLayerInputs(tokens, whole.embed(tokens)))));
      assert.deepEqual(bucket.ranges.filter(inTable(t)), [rowRange(t, 2, 3), rowRange(t, t.nVocab - 1, t.nVocab - 1)]);
      assert.ok(node.memory.rowCache > 0 && node.memory.rowCache <= 8 * 2 ** 20);
    } finally {
      node.close();
      whole.close();
    }
  });

  test("over HTTPS ranges through the disk cache: the rows read once from the server, then from the cache", async () => {
    const file = e2b();
    const t = await table(file);
    const server = await rangeServer(file);
    const cacheDir = fs.mkdtempSync(path.join(os.tmpdir(), "lf-per-layer-rows-"));
    const whole = await LayerNode.open({model: file, layers: [0, 1], build: "single", perLayerTable: "whole"});
    try {
      const tokens = [40, 41, 7];
      const expected = bytesOf(await whole.perLayerInputs(tokens, whole.embed(tokens)));
      for (const pass of [0, 1]) {
        const node = await LayerNode.open({model: server.url, cacheDir, layers: [0, 1], build: "single"});
        try {
          assert.ok(bytesOf(await node.perLayerInputs(tokens, node.embed(tokens))).equals(expected), `pass ${pass}`);
        } finally {
          node.close();
        }
        // The first node fetched rows 7 and 40-41 alone (the two reads run concurrently, so in
        // either order); the second found them (and its tensors) on disk.
        const byStart = (a, b) => a[0] - b[0];
        assert.deepEqual(server.ranges.filter(inTable(t)).sort(byStart), pass === 0 ? [rowRange(t, 7, 7), rowRange(t, 40, 41)] : [], `pass ${pass}`);
        server.ranges.length = 0;
      }
    } finally {
      whole.close();
      await server.stop();
      fs.rmSync(cacheDir, {recursive: true, force: true});
    }
  });

  test("the memory estimate counts the row cache, not the table", async () => {
    const file = e2b();
    const t = await table(file);
    const open = (options) => LayerNode.open({model: file, layers: [0, 1], build: "single", memoryBudgetBytes: 2 ** 31, maxTokens: 16, ...options});
    const whole = await open({perLayerTable: "whole"});
    const rows = await open({perLayerRowCacheBytes: 100 * t.rowBytes + 1});
    try {
      assert.equal(whole.memory.weights - rows.memory.weights, t.bytes);
      assert.equal(rows.memory.weights, rows.info().bytesLoaded);
      assert.equal(rows.memory.rowBytes, t.rowBytes);
      assert.equal(rows.memory.rowCache, 100 * t.rowBytes);
      assert.equal(whole.memory.rowCache, 0);
      // The whole estimate drops by the table, less the cache and one call's rows (16 tokens, read then copied).
      const drop = whole.memory.neededBytes - rows.memory.neededBytes;
      assert.ok(drop >= t.bytes - rows.memory.rowCache - 3 * 16 * t.rowBytes && drop < t.bytes,
        `the estimate dropped by ${drop}, the table is ${t.bytes} bytes`);
    } finally {
      whole.close();
      rows.close();
    }
  });

  test("plan --memory on an e2b-shape model counts the first node's row cache, not the table", async () => {
    const file = e2b();
    const t = await table(file);
    const header = await readModelHeader(file);
    const plan = (...args) => {
      const r = spawnSync(process.execPath, [cli, "plan", file, "--nodes", "4", "--json", ...args], {encoding: "utf8"});
      assert.equal(r.status, 0, r.stderr);
      return JSON.parse(r.stdout).nodes;
    };
    const bytesOfNames = (test) => header.tensors.filter((x) => test(x.name)).reduce((sum, x) => sum + x.n_bytes, 0);
    // The default 8 MiB holds this small vocabulary's whole table: the cache is the table then.
    assert.ok(t.bytes < 8 * 2 ** 20);
    for (const [args, cache] of [[[], t.bytes], [["--per-layer-row-cache", "64KiB"], Math.floor(2 ** 16 / t.rowBytes) * t.rowBytes]]) {
      const [first] = plan(...args);
      const layers = bytesOfNames((name) => {
        const m = /^blk\.(\d+)\./.exec(name);
        return m && Number(m[1]) <= first.layers[1];
      });
      const firstOnly = bytesOfNames((name) => ["token_embd.weight", "per_layer_model_proj.weight", "per_layer_proj_norm.weight"].includes(name));
      assert.equal(first.bytes, layers + firstOnly + cache, JSON.stringify(args));
    }
    const bad = spawnSync(process.execPath, [cli, "plan", file, "--nodes", "2", "--per-layer-row-cache", "8MB"], {encoding: "utf8"});
    assert.notEqual(bad.status, 0);
    assert.match(bad.stderr, /--per-layer-row-cache must be a number of bytes >= 0, optionally with KiB, MiB or GiB, got "8MB"/);
  });
});
