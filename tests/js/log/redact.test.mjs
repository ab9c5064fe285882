// Secrets never leave a node: a model URL's user:password@ and presigned query, a token quoted in
// a message, are redacted (log/redact.js) wherever text leaves the process — log lines,
// /v1/info, HTTP error answers, the CLI's messages.
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import {describe, test} from "node:test";

import {HttpError} from "../../../js-glue/src/server/http_error.js";
import {redactConfig, redactDeep, redactSecrets, redactUrl} from "../../../js-glue/src/log/redact.js";
import {model} from "../support/models.mjs";
import {cli, startServer, waitReady} from "../support/server_process.mjs";

const TOKEN = "redact-token-7";
const SECRETS = ["hunter2pw", "sig0123456789abcdef", "AKIAEXAMPLEKEY", "s3cr3tsession"];
const leaks = (text) => SECRETS.filter((secret) => text.includes(secret));

// An origin serving `bytes` with ranges (status: what every request gets instead, e.g. 403).
async function origin(t, bytes, status = null) {
  const server = http.createServer((req, res) => {
    if (status) {
      res.writeHead(status).end();
      return;
    }
    const m = /bytes=(\d+)-(\d*)/.exec(req.headers.range ?? "");
    const start = m ? Number(m[1]) : 0;
    const end = m && m[2] ? Math.min(Number(m[2]), bytes.length - 1) : bytes.length - 1;
    res.writeHead(m ? 206 : 200, {"content-length": end - start + 1, "accept-ranges": "bytes", etag: "\"v1\"",
      ...(m ? {"content-range": `bytes ${start}-${end}/${bytes.length}`} : {})});
    res.end(req.method === "HEAD" ? undefined : bytes.subarray(start, end + 1));
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => server.close());
  return `127.0.0.1:${server.address().port}`;
}

const presigned = (host, userinfo = "") => `http://${userinfo}${host}/models/tiny.gguf?X-Amz-Algorithm=AWS4-HMAC-SHA256` +
  "&X-Amz-Credential=AKIAEXAMPLEKEY%2F20250101&X-Amz-Security-Token=s3cr3tsession&X-Amz-Signature=sig0123456789abcdef";

describe("redactSecrets", () => {
  test("URLs lose user:password@ and their query; paths, s3:// and r2:// names stay", () => {
    assert.equal(redactUrl("https://user:hunter2pw@host.example/m.gguf?X-Amz-Signature=sig0123456789abcdef"), "https://host.example/m.gguf?[redacted]");
    assert.equal(redactUrl("r2://models/gemma-4-31B.gguf"), "r2://models/gemma-4-31B.gguf");
    assert.equal(redactUrl("build/models/tiny.gguf"), "build/models/tiny.gguf");
    assert.equal(redactSecrets(`${presigned("h:1", "u:hunter2pw@")}: HTTP 403 Forbidden`), "http://h:1/models/tiny.gguf?[redacted] HTTP 403 Forbidden");
    assert.equal(redactSecrets("s3://bucket/key.gguf: range [0, 10) outside the object's 4 bytes"), "s3://bucket/key.gguf: range [0, 10) outside the object's 4 bytes");
  });

  test("secret key=value pairs and bearer tokens outside a URL; prose about tokens stays", () => {
    assert.equal(redactSecrets("signed with X-Amz-Signature=sig0123456789abcdef&x=1"), "signed with X-Amz-Signature=[redacted]&x=1");
    assert.equal(redactSecrets("sent Authorization: Bearer s3cr3tsession"), "sent Authorization: Bearer [redacted]");
    assert.equal(redactSecrets("password: hunter2pw, token=s3cr3tsession"), "password: [redacted], token=[redacted]");
    for (const prose of ["missing or wrong bearer token (Authorization: Bearer <token>)", "\"tokens\" must be an array of 1 to 2048 token ids",
      "max_tokens 2048 · n_embd 64 · 4", "tokens[3] = 1.5: expected an integer"]) {
      assert.equal(redactSecrets(prose), prose);
    }
    assert.deepEqual(redactDeep({error: `GET ${presigned("h")} failed`, n: 3, list: ["Bearer s3cr3tsession"]}),
      {error: "GET http://h/models/tiny.gguf?[redacted] failed", n: 3, list: ["Bearer [redacted]"]});
    assert.deepEqual(redactConfig({authToken: "x", model: presigned("h"), port: 8080}), {authToken: "[redacted]", model: "http://h/models/tiny.gguf?[redacted]", port: 8080});
  });

  test("an HTTP error quoting a URL answers it redacted", async () => {
    const response = new HttpError("internal", `POST /v1/logits failed: ${presigned("h", "u:hunter2pw@")}`).toResponse();
    assert.deepEqual(leaks(await response.text()), []);
  });
});

describe("no secret reaches a log line or an answer", () => {
  test("a presigned model URL: /v1/info, the starting and ready lines show it without its signature", async (t) => {
    const host = await origin(t, fs.readFileSync(model("tiny", "tiny", ["--type", "Q4_0"])));
    const server = await startServer(t, {env: {AUTH_TOKEN: TOKEN, MODEL_URL: presigned(host)}});
    await waitReady(server.url);
    const info = await (await fetch(`${server.url}/v1/info`, {headers: {authorization: `Bearer ${TOKEN}`}})).json();
    assert.equal(info.model, `http://${host}/models/tiny.gguf?[redacted]`);
    assert.deepEqual(leaks(JSON.stringify(server.logs)), [], JSON.stringify(server.logs.slice(0, 3)));
    assert.ok(server.logs.some((l) => l.message === "ready" && l.model === info.model));
    assert.deepEqual(await server.stop(), {code: 0, signal: null});
    assert.deepEqual(leaks(JSON.stringify(server.logs) + server.stderr()), []);
  });

  test("a load that fails: the 'load failed' line names the object without user:password or query", async (t) => {
    const host = await origin(t, Buffer.alloc(0), 403);
    const server = await startServer(t, {env: {AUTH_TOKEN: TOKEN, MODEL_URL: presigned(host, "reader:hunter2pw@")}});
    const {code} = await server.exited;
    assert.equal(code, 1);
    const failed = server.logs.find((l) => l.message === "load failed");
    assert.ok(failed, JSON.stringify(server.logs));
    assert.match(failed.error, /127\.0\.0\.1/);
    assert.deepEqual(leaks(JSON.stringify(server.logs) + server.stderr()), [], JSON.stringify(failed));
  });

  test("the CLI's one-line error: no credentials from the URL it quotes", async (t) => {
    const host = await origin(t, Buffer.alloc(0), 403);
    const r = spawnSync(process.execPath, [cli, "inspect", presigned(host, "reader:hunter2pw@")], {encoding: "utf8", timeout: 60_000});
    assert.equal(r.status, 2);
    assert.match(r.stderr, /^layerfold inspect: /);
    assert.deepEqual(leaks(r.stdout + r.stderr), [], r.stderr);
  });
});
