// `layerfold pull URL` as a user runs it against a hub-like server (HF_ENDPOINT, HF_TOKEN from the
// environment): the whole file into the cache, which a later command reads with the hub gone; a
// pull killed partway continues where it stopped; a progress bar on a terminal; a refused token
// said without the token; a plain http(s) URL pulled too, its query never printed.
import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {after, before, describe, test} from "node:test";

import {startHub} from "../support/hub_server.mjs";
import {model, root} from "../support/models.mjs";
import {freePort} from "../support/servers.mjs";
import {runAsync} from "../support/run_async.mjs";
import {until} from "../support/wait.mjs";

const cli = path.join(root, "js-glue", "bin", "layerfold.js");
const TOKEN = "hf_clitoken9876543210";
const MiB = 1 << 20;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "lf-pull-"));
const sha256 = (bytes) => crypto.createHash("sha256").update(bytes).digest("hex");

describe("layerfold pull", () => {
  let hub;
  let env;
  const layerfold = (args, extraEnv = {}) => runAsync(process.execPath, [cli, ...args], {env: {...env, ...extraEnv}});

  before(async () => {
    hub = await startHub({token: TOKEN});
    env = {...process.env, HF_ENDPOINT: hub.hub, HF_TOKEN: TOKEN};
  });
  after(async () => {
    await hub.close();
    fs.rmSync(tmp, {recursive: true, force: true});
  });

  test("pulls hf://OWNER/REPO/FILE into the cache, which validate then reads with the hub gone", async () => {
    const file = model("tiny", "tiny", ["--type", "Q4_0"]);
    const bytes = fs.readFileSync(file);
    hub.publish("me/tiny-gguf/tiny-q4_0.gguf", bytes);
    const cache = path.join(tmp, "validate");
    const r = await layerfold(["pull", "hf://me/tiny-gguf/tiny-q4_0.gguf", "--cache-dir", cache, "--json"]);
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), {model: "hf://me/tiny-gguf/tiny-q4_0.gguf", bytes: bytes.length, sha256: sha256(bytes),
      cache_dir: cache, resumed_at: 0, fetched_bytes: bytes.length});
    assert.ok(!`${r.stdout}${r.stderr}`.includes(TOKEN));

    const again = await layerfold(["pull", "hf://me/tiny-gguf/tiny-q4_0.gguf", "--cache-dir", cache]);
    assert.equal(again.status, 0, again.stderr);
    assert.match(again.stdout, new RegExp(`^hf://me/tiny-gguf/tiny-q4_0\\.gguf: [0-9.]+ MiB, sha256 ${sha256(bytes)}, already in the cache \\(`));

    const local = await layerfold(["validate", "--model", file, "--json", "--top-k", "10"]);
    assert.equal(local.status, 0, local.stderr);
    const offline = await layerfold(["validate", "--model", "hf://me/tiny-gguf/tiny-q4_0.gguf", "--cache-dir", cache, "--json", "--top-k", "10"],
      {HF_ENDPOINT: `http://127.0.0.1:${await freePort()}`});
    assert.equal(offline.status, 0, offline.stderr);
    assert.deepEqual(JSON.parse(offline.stdout).top, JSON.parse(local.stdout).top);
  });

  test("a pull killed partway continues from what it wrote", async () => {
    const bytes = crypto.randomBytes(64 * MiB + 3 * MiB + 5);
    hub.publish("me/big/big.gguf", bytes);
    const cache = path.join(tmp, "resume");
    // The CDN holds the second range (the first is 64 MiB) unanswered: the pull is then killed.
    hub.state.holdFrom = 64 * MiB;
    const first = layerfold(["pull", "hf://me/big/big.gguf", "--cache-dir", cache]);
    try {
      await until(() => hub.state.held.length > 0, "the second range to be asked for", 60_000);
    } finally {
      first.child.kill("SIGKILL");
    }
    assert.equal((await first).signal, "SIGKILL");
    hub.state.holdFrom = null;
    hub.state.cdnRequests.length = 0;
    const second = await layerfold(["pull", "hf://me/big/big.gguf", "--cache-dir", cache, "--json"]);
    assert.equal(second.status, 0, second.stderr);
    const out = JSON.parse(second.stdout);
    assert.equal(out.resumed_at, 64 * MiB);
    assert.equal(out.fetched_bytes, 3 * MiB + 5);
    assert.equal(out.sha256, sha256(bytes));
    assert.deepEqual(hub.state.cdnRequests.filter((r) => r.method === "GET").map((r) => r.range), [`bytes=${64 * MiB}-${bytes.length - 1}`]);
  });

  test("shows a progress bar on a terminal", async () => {
    hub.publish("me/bar/bar.gguf", crypto.randomBytes(2 * MiB));
    // Under a pseudo-terminal (script(1)) the pull shows a cli-progress bar on stderr.
    const tty = await runAsync("script", ["-qec", `${process.execPath} ${cli} pull hf://me/bar/bar.gguf --cache-dir ${path.join(tmp, "bar")}`, "/dev/null"], {env});
    assert.equal(tty.status, 0, tty.stdout);
    assert.match(tty.stdout, /pull \|.*\| *\d+%/);
  });

  test("a refused token: exit 2, saying HF_TOKEN does not give access, without the token", async () => {
    const r = await layerfold(["pull", "hf://me/tiny-gguf/tiny-q4_0.gguf", "--cache-dir", path.join(tmp, "refused")], {HF_TOKEN: "hf_not_the_right_one"});
    assert.equal(r.status, 2);
    assert.match(r.stderr, /^layerfold pull: hf:\/\/me\/tiny-gguf\/tiny-q4_0\.gguf: HTTP 401 .*HF_TOKEN was sent and does not give access\n$/);
    assert.ok(!r.stderr.includes("hf_not_the_right_one"));
  });

  test("an http(s) URL is pulled too, printed without its query", async () => {
    const bytes = crypto.randomBytes(MiB + 1);
    const {sha256: digest} = hub.publish("me/plain/plain.gguf", bytes);
    const url = `${hub.cdn}/blobs/${digest}?X-Amz-Signature=secret-sig`;
    const r = await layerfold(["pull", url, "--cache-dir", path.join(tmp, "plain"), "--json"]);
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout);
    assert.equal(out.model, `${hub.cdn}/blobs/${digest}?[redacted]`);
    assert.equal(out.sha256, digest);
    assert.ok(!r.stdout.includes("secret-sig"));
  });

  test("a local path or no URL: exit 2 with the reason", async () => {
    const local = await layerfold(["pull", "model.gguf"]);
    assert.equal(local.status, 2);
    assert.match(local.stderr, /^layerfold pull: model\.gguf: pull takes an hf:\/\/, http\(s\):\/\/, s3:\/\/ or r2:\/\/ URL/);
    const none = await layerfold(["pull"]);
    assert.equal(none.status, 2);
    assert.match(none.stderr, /pull takes one model URL/);
  });
});
