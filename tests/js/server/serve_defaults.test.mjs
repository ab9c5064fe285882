// `layerfold serve` as a careless operator would start it: no token on a public address, an
// empty token, a token with a newline from a secret file, a KV limit no session fits in — each
// refused at start with the reason. And its log as an operator reads it: a client that went
// away or a node still loading is not an ERROR.
import assert from "node:assert/strict";
import {spawn} from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import {describe, test} from "node:test";

import {isLoopback} from "../../../js-glue/src/server/node_process.js";
import {model, root} from "../support/models.mjs";
import {cli, startServer, waitReady} from "../support/server_process.mjs";

const tiny = () => model("tiny", "tiny", ["--type", "Q4_0"]);
const TOKEN = "defaults-token-2";

// The environment without any AUTH_TOKEN or LAYERFOLD_INSECURE_NO_AUTH the test runner may have.
function envWith(extra) {
  const env = {...process.env};
  delete env.AUTH_TOKEN;
  delete env.LAYERFOLD_INSECURE_NO_AUTH;
  return {...env, ...extra};
}

// Runs `layerfold serve args` until it exits (or timeoutMs: then it is killed and exit is null).
function serveUntilExit(args, env, timeoutMs = 30_000) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [cli, "serve", "--port", "0", "--threads", "1", ...args], {cwd: root, env: envWith(env)});
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c) => { stdout += c; });
    child.stderr.on("data", (c) => { stderr += c; });
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({code, stdout, stderr, logs: stdout.split("\n").filter(Boolean).map((l) => JSON.parse(l))});
    });
  });
}

describe("serve refuses to start unsafely, naming why", () => {
  test("isLoopback: 127.0.0.0/8, ::1 and localhost only", () => {
    for (const host of ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost", "::ffff:127.0.0.1"]) assert.equal(isLoopback(host), true, host);
    for (const host of ["0.0.0.0", "::", "10.0.0.7", "192.168.1.2", "example.com", "128.0.0.1"]) assert.equal(isLoopback(host), false, host);
  });

  test("no AUTH_TOKEN on 0.0.0.0: exit 2 before listening, saying how to serve safely", async () => {
    const r = await serveUntilExit(["--model", tiny(), "--host", "0.0.0.0"], {});
    assert.equal(r.code, 2, `serve started open on 0.0.0.0: ${r.stdout.slice(0, 300)}`);
    assert.match(r.stderr, /refusing to serve without AUTH_TOKEN on 0\.0\.0\.0, which is not a loopback address/);
    assert.match(r.stderr, /--insecure-no-auth \(LAYERFOLD_INSECURE_NO_AUTH=1\)/);
    assert.equal(r.logs.some((l) => l.message === "listening"), false);
  });

  for (const [how, args, env] of [["--insecure-no-auth", ["--insecure-no-auth"], {}], ["LAYERFOLD_INSECURE_NO_AUTH=1", [], {LAYERFOLD_INSECURE_NO_AUTH: "1"}]]) {
    test(`no AUTH_TOKEN on 0.0.0.0 with ${how}: serves open, and says so as a WARNING`, async (t) => {
      const server = await startServer(t, {argv: [cli, "serve", "--model", tiny(), "--host", "0.0.0.0", "--port", "0", "--threads", "1", ...args], env: envWith(env)});
      await waitReady(server.url);
      assert.equal((await fetch(`${server.url}/v1/info`)).status, 200);
      const warning = server.logs.find((l) => l.severity === "WARNING" && /NO AUTHENTICATION/.test(l.message));
      assert.ok(warning, JSON.stringify(server.logs.slice(0, 4)));
      assert.equal(server.logs.find((l) => l.message === "starting").config.insecureNoAuth, true);
      assert.deepEqual(await server.stop(), {code: 0, signal: null});
    });
  }

  test("no AUTH_TOKEN on loopback: serves, without the warning (what the tests do)", async (t) => {
    const server = await startServer(t, {args: ["--model", tiny()], env: envWith({})});
    await waitReady(server.url);
    assert.equal(server.logs.some((l) => l.severity === "WARNING"), false);
    assert.deepEqual(await server.stop(), {code: 0, signal: null});
  });

  for (const [name, token, message] of [
    ["empty", "", /AUTH_TOKEN \(authToken\) is set but empty/],
    ["with a space", "abc def", /AUTH_TOKEN \(authToken\) contains whitespace at position 3/],
    ["with a trailing newline", "abcdef\n", /AUTH_TOKEN \(authToken\) contains whitespace at position 6 \(a trailing newline from a secret file\?\)/],
    ["with a non-ASCII character", "abcdé", /AUTH_TOKEN \(authToken\) contains a character outside visible ASCII at position 4/],
  ]) {
    test(`AUTH_TOKEN ${name}: exit 2 at start`, async () => {
      const r = await serveUntilExit(["--model", tiny(), "--host", "127.0.0.1"], {AUTH_TOKEN: token});
      assert.equal(r.code, 2, `serve started with AUTH_TOKEN ${JSON.stringify(token)}: ${r.stdout.slice(0, 300)}`);
      assert.match(r.stderr, message);
      assert.equal(r.stderr.includes(token) && token !== "", false, "the token was printed");
    });
  }

  test("MAX_KV_BYTES below one session's KV cache: exit 1 at load, the log line giving both numbers", async () => {
    const r = await serveUntilExit(["--model", tiny(), "--host", "127.0.0.1"], {AUTH_TOKEN: TOKEN, MAX_KV_BYTES: "1000"});
    assert.equal(r.code, 1, r.stdout.slice(0, 500));
    const failed = r.logs.find((l) => l.message === "load failed");
    assert.equal(failed.code, "invalid_argument");
    assert.match(failed.error, /maxKvBytes 1000 is below the \d+ bytes one session's KV cache needs \(layers \[0, 2\) at max context 512\)/);
  });
});

describe("the log says what happened at the right severity", () => {
  test("a client that aborts mid-upload: a WARNING with status 499, never a 500 at ERROR", async (t) => {
    const server = await startServer(t, {args: ["--model", tiny()], env: {AUTH_TOKEN: TOKEN}});
    await waitReady(server.url);
    const {port} = new URL(server.url);
    await new Promise((resolve) => {
      const socket = net.connect(Number(port), "127.0.0.1", () => {
        socket.write(`POST /v1/sessions/s/forward?start_pos=0 HTTP/1.1\r\nHost: n\r\nAuthorization: Bearer ${TOKEN}\r\n` +
          "Content-Type: application/octet-stream\r\nContent-Length: 2560\r\n\r\n");
        socket.write(Buffer.alloc(1000));
        setTimeout(() => { socket.destroy(); resolve(); }, 200);
      });
    });
    for (let i = 0; i < 100 && !server.logs.some((l) => l.message === "request" && l.route === "/v1/sessions/:id/forward"); i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const line = server.logs.find((l) => l.message === "request" && l.route === "/v1/sessions/:id/forward");
    assert.deepEqual([line?.severity, line?.status], ["WARNING", 499], JSON.stringify(server.logs.slice(-3)));
    assert.equal(server.logs.some((l) => l.severity === "ERROR"), false);
    assert.deepEqual(await server.stop(), {code: 0, signal: null});
  });

  test("/readyz and /v1 answering 503 while the weights load: INFO lines, no ERROR", async (t) => {
    const bytes = fs.readFileSync(tiny());
    let open;
    const gate = new Promise((resolve) => { open = resolve; });
    const origin = http.createServer(async (req, res) => {
      await gate;
      const m = /bytes=(\d+)-(\d*)/.exec(req.headers.range ?? "");
      const start = m ? Number(m[1]) : 0;
      const end = m && m[2] ? Math.min(Number(m[2]), bytes.length - 1) : bytes.length - 1;
      res.writeHead(m ? 206 : 200, {"content-length": end - start + 1, "accept-ranges": "bytes", etag: "\"t\"",
        ...(m ? {"content-range": `bytes ${start}-${end}/${bytes.length}`} : {})});
      res.end(req.method === "HEAD" ? undefined : bytes.subarray(start, end + 1));
    });
    await new Promise((resolve) => origin.listen(0, "127.0.0.1", resolve));
    t.after(() => origin.close());
    const server = await startServer(t, {env: {AUTH_TOKEN: TOKEN, MODEL_URL: `http://127.0.0.1:${origin.address().port}/tiny.gguf`}});
    assert.equal((await fetch(`${server.url}/readyz`)).status, 503);
    assert.equal((await fetch(`${server.url}/v1/info`, {headers: {authorization: `Bearer ${TOKEN}`}})).status, 503);
    open();
    await waitReady(server.url);
    const loading = server.logs.filter((l) => l.message === "request" && l.status === 503);
    assert.ok(loading.length >= 2);
    assert.ok(loading.every((l) => l.severity === "INFO"), JSON.stringify(loading));
    assert.equal(server.logs.some((l) => l.severity === "ERROR"), false);
    assert.deepEqual(await server.stop(), {code: 0, signal: null});
  });
});
