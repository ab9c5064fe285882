// hf://OWNER/REPO/FILE[@REVISION] against a local hub-like server (tests/js/support/hub_server.mjs):
// the resolve URL, the 302 to another host, the token sent to the hub and never to the CDN, the
// reads pinned to one commit, a transfer broken partway resumed, an expired CDN signature, a file
// changed on the hub never mixed with the cached copy, and pull() filling the cache with the whole
// file, continuing a pull cut short and refusing bytes that are not the hub's sha256.
import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {after, before, beforeEach, describe, test} from "node:test";

import {hfConfig, parseHfUrl, resolveUrl} from "../../../js-glue/src/sources/hf.js";
import {openSource} from "../../../js-glue/src/sources/open_source.js";
import {startHub} from "../support/hub_server.mjs";

const TOKEN = "hf_testtoken0123456789";
const MiB = 1 << 20;
const fast = {retries: 3, backoffMs: 5, maxBackoffMs: 20};
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "lf-hf-"));
const sha256 = (bytes) => crypto.createHash("sha256").update(bytes).digest("hex");

describe("hf:// URLs", () => {
  test("OWNER/REPO/FILE with folders and an optional @REVISION after the last '@'", () => {
    assert.deepEqual(parseHfUrl("hf://google/gemma-3/gemma.gguf"), {owner: "google", repo: "gemma-3", file: "gemma.gguf", revision: "main"});
    assert.deepEqual(parseHfUrl("hf://me/r.x/q4/model.gguf@refs/pr/1"), {owner: "me", repo: "r.x", file: "q4/model.gguf", revision: "refs/pr/1"});
  });

  test("malformed ones are refused with a reason", () => {
    for (const [url, why] of [["hf://google/gemma.gguf", /owner, a repository and a file/], ["hf://go ogle/r/f.gguf", /letters, digits/],
      ["hf://me/r/", /no file path/], ["hf://me/r/a//b.gguf", /no file path/], ["hf://me/r/../x", /no file path/], ["hf://me/r/f.gguf@", /empty revision/]]) {
      assert.throws(() => parseHfUrl(url), (e) => e.code === "bad_url" && why.test(e.message), url);
    }
  });

  test("the resolve URL encodes the revision as one path part", () => {
    const parts = parseHfUrl("hf://me/r/q4/a b.gguf@refs/pr/1");
    assert.equal(resolveUrl("https://hub.example", parts, parts.revision), "https://hub.example/me/r/resolve/refs%2Fpr%2F1/q4/a%20b.gguf");
  });

  test("HF_ENDPOINT and HF_TOKEN from the environment, the hub by default, a bad endpoint refused", () => {
    assert.deepEqual(hfConfig({}, {}), {endpoint: "https://huggingface.co", origin: "https://huggingface.co", token: null});
    assert.deepEqual(hfConfig({}, {HF_ENDPOINT: "http://127.0.0.1:9/", HF_TOKEN: "t"}), {endpoint: "http://127.0.0.1:9", origin: "http://127.0.0.1:9", token: "t"});
    assert.throws(() => hfConfig({}, {HF_ENDPOINT: "ftp://x"}), /HF_ENDPOINT "ftp:\/\/x" is not an http\(s\) URL/);
  });
});

describe("the hf source against a hub-like server", () => {
  let hub;
  let v1;
  let bytes;
  const url = "hf://me/tiny/q4/tiny.gguf";
  const open = (extra = {}) => openSource(url, {hfEndpoint: hub.hub, hfToken: TOKEN, ...fast, ...extra});

  before(async () => {
    hub = await startHub({token: TOKEN});
    bytes = crypto.randomBytes(3 * MiB + 12345);
    v1 = hub.publish("me/tiny/q4/tiny.gguf", bytes);
  });
  after(() => hub.close());
  beforeEach(() => {
    hub.state.hubRequests.length = 0;
    hub.state.cdnRequests.length = 0;
  });

  test("reads the file by range from the CDN, pinned to the commit, the token sent to the hub only", async () => {
    const source = await open();
    assert.equal(source.size, bytes.length);
    assert.equal(source.commit, v1.commit);
    assert.equal(source.sha256, sha256(bytes));
    assert.equal(source.identity, `${url}#${sha256(bytes)}`);
    assert.deepEqual(Buffer.from(await source.read(1000, 2 * MiB)), bytes.subarray(1000, 2 * MiB));
    assert.deepEqual(Buffer.from(await source.read(3 * MiB, bytes.length)), bytes.subarray(3 * MiB));
    await source.close();
    const {hubRequests, cdnRequests} = hub.state;
    assert.ok(hubRequests.every((r) => r.authorization === `Bearer ${TOKEN}`), JSON.stringify(hubRequests));
    assert.ok(cdnRequests.every((r) => r.authorization === undefined), JSON.stringify(cdnRequests));
    // The revision asked, then its commit; the CDN URL it redirects to reused for every range.
    assert.deepEqual(hubRequests.map((r) => r.url), ["/me/tiny/resolve/main/q4/tiny.gguf", `/me/tiny/resolve/${v1.commit}/q4/tiny.gguf`]);
    assert.deepEqual(cdnRequests.filter((r) => r.method === "GET").map((r) => r.range), [`bytes=1000-${2 * MiB - 1}`, `bytes=${3 * MiB}-${bytes.length - 1}`]);
  });

  test("an expired CDN signature sends the next range back to the hub", async () => {
    const source = await open();
    for (const r of hub.state.cdnRequests) hub.state.expired.add(new URL(r.url, "http://x").searchParams.get("X-Amz-Signature"));
    assert.deepEqual(Buffer.from(await source.read(10, 20)), bytes.subarray(10, 20));
    assert.equal(hub.state.hubRequests.length, 3);
    assert.equal(hub.state.cdnRequests.at(-2).range, "bytes=10-19");
    assert.equal(hub.state.cdnRequests.at(-1).range, "bytes=10-19");
  });

  test("a transfer broken partway resumes from the byte reached", async () => {
    const source = await open();
    hub.state.breakAfter = 5000;
    assert.deepEqual(Buffer.from(await source.read(0, MiB)), bytes.subarray(0, MiB));
    assert.deepEqual(hub.state.cdnRequests.filter((r) => r.method === "GET").map((r) => r.range), [`bytes=0-${MiB - 1}`, `bytes=5000-${MiB - 1}`]);
  });

  test("no token or a wrong one: 'unauthorized', saying so, the token never in the message", async () => {
    await assert.rejects(openSource(url, {hfEndpoint: hub.hub, ...fast}), (e) => e.code === "unauthorized" &&
      /^hf:\/\/me\/tiny\/q4\/tiny\.gguf: HTTP 401 .*\(GatedRepo\): a private or gated repository needs HF_TOKEN$/.test(e.message));
    await assert.rejects(open({hfToken: "hf_wrong_secret"}), (e) => e.code === "unauthorized" && /HF_TOKEN was sent and does not give access/.test(e.message) &&
      !e.message.includes("hf_wrong_secret"));
  });

  test("a missing file or revision: 'not_found' with the hub's error code", async () => {
    await assert.rejects(openSource("hf://me/tiny/none.gguf", {hfEndpoint: hub.hub, hfToken: TOKEN, ...fast}), (e) => e.code === "not_found" && /\(EntryNotFound\)/.test(e.message));
    await assert.rejects(openSource(`${url}@nope`, {hfEndpoint: hub.hub, hfToken: TOKEN, ...fast}), (e) => e.code === "not_found" && /\(RevisionNotFound\)/.test(e.message));
  });

  test("the CDN's signed URL never reaches an error", async () => {
    const source = await open({retries: 0});
    const blob = hub.state.blobs.get(v1.sha256);
    hub.state.blobs.delete(v1.sha256);
    try {
      await assert.rejects(source.read(0, 10), (e) => e.code === "not_found" && e.message.startsWith(`${url}: HTTP 404`) && !/Signature|127\.0\.0\.1/.test(e.message));
    } finally {
      hub.state.blobs.set(v1.sha256, blob);
    }
  });
});

describe("hf:// through the disk cache", () => {
  let hub;
  const url = "hf://me/changing/m.gguf";
  const options = (cacheDir, extra = {}) => ({hfEndpoint: hub.hub, ...fast, cacheDir, onWarning: () => {}, ...extra});

  before(async () => {
    hub = await startHub();
  });
  after(() => hub.close());

  test("a file changed on the hub (a new commit and ETag) is never mixed with the cached copy", async () => {
    const cacheDir = path.join(tmp, "changed");
    const one = crypto.randomBytes(2 * MiB);
    const two = crypto.randomBytes(2 * MiB);
    const v1 = hub.publish("me/changing/m.gguf", one);
    const first = await openSource(url, options(cacheDir));
    assert.deepEqual(Buffer.from(await first.read(0, MiB)), one.subarray(0, MiB));
    await first.close();
    hub.publish("me/changing/m.gguf", two);
    // The cached range still serves the version it was of; a missing one finds the file changed.
    const second = await openSource(url, options(cacheDir));
    assert.deepEqual(Buffer.from(await second.read(0, MiB)), one.subarray(0, MiB));
    await assert.rejects(second.read(MiB, 2 * MiB), (e) => e.code === "source_changed" && e.staleCache === true);
    const third = await openSource(url, options(cacheDir));
    assert.deepEqual(Buffer.from(await third.read(0, 2 * MiB)), two);
    // The first version, by its commit, is another file.
    const pinned = await openSource(`${url}@${v1.commit}`, options(cacheDir));
    assert.deepEqual(Buffer.from(await pinned.read(MiB, 2 * MiB)), one.subarray(MiB));
  });

  test("pull() keeps the whole file; a pull cut short continues from its last whole block; loads read any range from it", async () => {
    const cacheDir = path.join(tmp, "pulled");
    const bytes = crypto.randomBytes(4 * MiB + 777);
    const v = hub.publish("me/pulled/m.gguf", bytes);
    const pulledUrl = "hf://me/pulled/m.gguf";
    // The first pull loses its connection in its second range, with no retries left.
    const first = await openSource(pulledUrl, options(cacheDir, {revalidate: true, retries: 0}));
    let reports = 0;
    await assert.rejects(first.pull({chunkBytes: MiB, onProgress: () => { if (++reports === 1) hub.state.breakAfter = 100; }}), (e) => e.code === "network");
    hub.state.cdnRequests.length = 0;
    const second = await openSource(pulledUrl, options(cacheDir, {revalidate: true}));
    const progress = [];
    const pulled = await second.pull({chunkBytes: MiB, onProgress: (p) => progress.push(p.bytes)});
    assert.equal(pulled.resumedAt, MiB);
    assert.equal(pulled.fetchedBytes, bytes.length - MiB);
    assert.equal(pulled.whole.sha256, v.sha256);
    assert.equal(hub.state.cdnRequests.find((r) => r.method === "GET").range, `bytes=${MiB}-${2 * MiB - 1}`);
    assert.equal(progress.at(-1), bytes.length);
    // Pulled again: nothing fetched.
    assert.equal((await second.pull()).fetchedBytes, 0);

    // A load reads ranges across blocks from the pulled file, with no request.
    const requests = hub.state.cdnRequests.length + hub.state.hubRequests.length;
    const load = await openSource(pulledUrl, options(cacheDir));
    for (const [start, end] of [[0, 10], [MiB - 3, 3 * MiB + 5], [4 * MiB, bytes.length]]) {
      assert.deepEqual(Buffer.from(await load.read(start, end)), bytes.subarray(start, end));
    }
    assert.equal(hub.state.cdnRequests.length + hub.state.hubRequests.length, requests);

    // A block changed on disk is seen: that range comes from the hub again, the whole file is dropped.
    const dir = path.dirname(fs.readdirSync(cacheDir, {recursive: true}).map((f) => path.join(cacheDir, f)).find((f) => f.endsWith("whole.bin")));
    const fd = fs.openSync(path.join(dir, "whole.bin"), "r+");
    fs.writeSync(fd, Buffer.from([bytes[2 * MiB + 1] ^ 1]), 0, 1, 2 * MiB + 1);
    fs.closeSync(fd);
    const again = await openSource(pulledUrl, options(cacheDir));
    assert.deepEqual(Buffer.from(await again.read(2 * MiB, 2 * MiB + 10)), bytes.subarray(2 * MiB, 2 * MiB + 10));
    assert.equal(again.stats.discarded, 1);
    assert.ok(!fs.existsSync(path.join(dir, "whole.bin")));
  });

  test("a pull whose bytes are not the hub's sha256 keeps nothing", async () => {
    const cacheDir = path.join(tmp, "mismatch");
    const bytes = crypto.randomBytes(MiB + 5);
    const v = hub.publish("me/bad/m.gguf", bytes);
    hub.state.blobs.set(v.sha256, crypto.randomBytes(bytes.length));
    const source = await openSource("hf://me/bad/m.gguf", options(cacheDir, {revalidate: true}));
    await assert.rejects(source.pull(), (e) => e.code === "checksum_mismatch" && e.message.includes(`the source gives ${v.sha256}`));
    const left = fs.readdirSync(cacheDir, {recursive: true});
    assert.ok(!left.some((f) => /whole\.(bin|partial|json)$/.test(f)), left.join(" "));
  });

  test("a pull cut short of one version is not continued for the next", async () => {
    const cacheDir = path.join(tmp, "partial-changed");
    const one = crypto.randomBytes(3 * MiB);
    const two = crypto.randomBytes(3 * MiB);
    hub.publish("me/partial/m.gguf", one);
    const first = await openSource("hf://me/partial/m.gguf", options(cacheDir, {revalidate: true, retries: 0}));
    let reports = 0;
    await assert.rejects(first.pull({chunkBytes: MiB, onProgress: () => { if (++reports === 1) hub.state.breakAfter = 100; }}));
    const v2 = hub.publish("me/partial/m.gguf", two);
    const second = await openSource("hf://me/partial/m.gguf", options(cacheDir, {revalidate: true}));
    const pulled = await second.pull({chunkBytes: MiB});
    assert.equal(pulled.resumedAt, 0);
    assert.equal(pulled.whole.sha256, v2.sha256);
    assert.deepEqual(Buffer.from(await second.read(0, 3 * MiB)), two);
  });
});

after(() => fs.rmSync(tmp, {recursive: true, force: true}));
