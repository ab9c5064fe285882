// Load and faults together, on loopback, for a bounded time: clients that run sessions (prefill,
// decode steps, logits) and check every answer against an in-process LayerNode byte for byte;
// clients that upload slowly, within and beyond the body deadline; clients that abandon their
// upload or the answer midway, or stop reading it; and the node killed (SIGKILL) and stopped
// (SIGTERM) and restarted on the same port while all this goes on. Nothing is lost and nothing
// is wrong: a session's every step ends in its right bytes (retried with its Idempotency-Key,
// or the session replayed from position 0 after a restart), and the only other answers are the
// deliberate ones: 429 queue_full, 503 not_ready / shutting_down, 404 unknown_session after a
// restart, 408 body_timeout for the upload meant to be too slow. No ERROR line in any log.
import assert from "node:assert/strict";
import http from "node:http";
import {describe, test} from "node:test";

import {LayerNode} from "../../../js-glue/src/node/layer_node.js";
import {model} from "../support/models.mjs";
import {bytesOf, startServer, waitReady} from "../support/server_process.mjs";
import {freePort} from "../support/servers.mjs";

const TOKEN = "load-faults-token-5";
const RUN_MS = 20_000;                         // the load, from the first ready node
const RESTARTS = [["SIGKILL", 6_000], ["SIGTERM", 13_000]];
const BODY_TIMEOUT_MS = 2500;  // wide of both slow clients: a busy 2-core machine delays timers
const SEND_TIMEOUT_MS = 1500;
const SESSION_CLIENTS = 6;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// One HTTP exchange with what fetch cannot do: a body written in `chunks` with gaps between
// them, an upload abandoned after `abandonUploadAfter` chunks, an answer abandoned after its
// first bytes (`abandonAnswer`) or left unread for `stallMs`. Resolves {status, body, headers}
// or {transport: code} when the connection failed; an abandoned request resolves {abandoned}.
function exchange(url, {method = "POST", path, headers = {}, chunks = [], gapMs = 0, agent, abandonUploadAfter = null,
  abandonAnswer = false, stallMs = 0}) {
  return new Promise((resolve) => {
    const {port} = new URL(url);
    const length = chunks.reduce((n, c) => n + c.length, 0);
    const request = http.request({host: "127.0.0.1", port, method, path, agent,
      headers: {authorization: `Bearer ${TOKEN}`, ...(chunks.length ? {"content-length": length} : {}), ...headers}});
    let settled = false;
    const settle = (value) => {
      if (!settled) resolve(value);
      settled = true;
    };
    request.on("error", (error) => settle({transport: error.code ?? error.message}));
    request.on("response", (response) => {
      const parts = [];
      if (abandonAnswer) {
        response.once("data", () => {
          request.destroy();
          settle({abandoned: "answer", status: response.statusCode});
        });
        return;
      }
      if (stallMs) {
        response.pause();
        setTimeout(() => response.resume(), stallMs);
      }
      response.on("data", (c) => parts.push(c));
      response.on("end", () => settle({status: response.statusCode, headers: response.headers, body: Buffer.concat(parts)}));
      response.on("error", (error) => settle({transport: error.code ?? error.message, status: response.statusCode}));
      response.on("aborted", () => settle({transport: "aborted", status: response.statusCode}));
    });
    (async () => {
      for (const [i, chunk] of chunks.entries()) {
        if (abandonUploadAfter !== null && i === abandonUploadAfter) {
          request.destroy();
          settle({abandoned: "upload"});
          return;
        }
        if (i > 0 && gapMs) await sleep(gapMs);
        if (request.destroyed) return;
        request.write(chunk);
      }
      request.end();
    })();
  });
}

const errorCode = (r) => {
  try {
    return JSON.parse(r.body.toString()).error.code;
  } catch {
    return null;
  }
};

// A session's script: a prompt of 3 + k rows, then three decode steps (last row only), then the
// logits of the last output; the expected bytes of each from the in-process node.
async function scripts(reference, n) {
  const out = [];
  for (let k = 0; k < n; k++) {
    const tokens = [2, 10 + k, 20 + k, 30 + k, ...Array.from({length: k}, (_, i) => 40 + i)];
    const steps = [{hidden: reference.embed(tokens), lastOnly: false}];
    for (let d = 0; d < 3; d++) steps.push({hidden: reference.embed([50 + k + d]), lastOnly: true});
    let startPos = 0;
    let last = null;
    for (const step of steps) {
      step.startPos = startPos;
      last = await reference.forward({session: `ref-${k}`, startPos, hidden: step.hidden, lastOnly: step.lastOnly});
      step.expected = bytesOf(last);
      startPos += step.hidden.length / reference.nEmbd;
    }
    out.push({steps, logits: bytesOf(reference.logits(last.subarray(-reference.nEmbd))), lastOut: last.subarray(-reference.nEmbd)});
  }
  return out;
}

describe("load and faults", () => {
  test(`${SESSION_CLIENTS} session clients, slow and abandoning clients, the node killed and stopped under load: nothing lost, nothing wrong`, {timeout: 120_000}, async (t) => {
    const file = model("tiny", "tiny", ["--type", "Q4_0"]);
    const reference = await LayerNode.open({model: file, threads: 1});
    t.after(() => reference.close());
    const plans = await scripts(reference, 4);

    const port = await freePort();
    const args = ["--model", file, "--port", String(port), "--max-queue", "4", "--max-sessions", "64",
      "--body-timeout-ms", String(BODY_TIMEOUT_MS), "--send-timeout-ms", String(SEND_TIMEOUT_MS)];
    const instances = [];
    const start = async () => {
      const server = await startServer(t, {args, env: {AUTH_TOKEN: TOKEN}});
      instances.push(server);
      return server;
    };
    let server = await start();
    const url = server.url;
    await waitReady(url);

    const t0 = Date.now();
    const running = () => Date.now() - t0 < RUN_MS;
    const tally = {steps: 0, sessions: 0, replays: 0, retriedWithKey: 0, logits: 0, statuses: {}, transport: {}, wrong: [], lost: []};
    const count = (bucket, key) => { bucket[key] = (bucket[key] ?? 0) + 1; };
    const deliberate = new Set(["429 queue_full", "503 not_ready", "503 shutting_down", "404 unknown_session"]);

    // One step until it is answered right: the same key after a 429, a 503 or a lost
    // connection; null after a 404 (the session is gone: the caller replays it).
    async function step(agent, session, s, key) {
      for (let attempt = 0; attempt < 200; attempt++) {
        const r = await exchange(url, {agent, path: `/v1/sessions/${session}/forward?start_pos=${s.startPos}${s.lastOnly ? "&last_only=1" : ""}`,
          headers: {"content-type": "application/octet-stream", "idempotency-key": key}, chunks: [bytesOf(s.hidden)]});
        if (r.transport) {
          count(tally.transport, r.transport);
          tally.retriedWithKey++;
          await sleep(50);
          continue;
        }
        const what = `${r.status} ${r.status === 200 ? "ok" : errorCode(r)}`;
        count(tally.statuses, what);
        if (r.status === 200) {
          if (!r.body.equals(s.expected)) tally.wrong.push(`${session} at ${s.startPos}: the bytes differ from the in-process run`);
          return true;
        }
        if (!deliberate.has(what)) {
          tally.wrong.push(`${session} at ${s.startPos}: ${what} ${r.body.toString().slice(0, 200)}`);
          return true;
        }
        if (r.status === 404) return null;
        tally.retriedWithKey++;
        await sleep(r.status === 429 ? Math.min(1000, Number(r.headers["retry-after"] ?? 1) * 200) : 100);
      }
      tally.lost.push(`${session} at ${s.startPos}: no answer after 200 attempts`);
      return true;
    }

    async function sessionClient(c) {
      const agent = new http.Agent({keepAlive: true, maxSockets: 1});
      for (let n = 0; running(); n++) {
        const plan = plans[(c + n) % plans.length];
        const session = `c${c}-${n}`;
        let replays = 0;
        for (let i = 0; i < plan.steps.length;) {
          const done = await step(agent, session, plan.steps[i], `${session}-${i}-${replays}`);
          if (done === null) {
            replays++;
            tally.replays++;
            i = 0;  // the node lost the session: replay it from position 0 with new keys
            if (replays > 20) {
              tally.lost.push(`${session}: replayed 20 times`);
              break;
            }
            continue;
          }
          tally.steps++;
          i++;
        }
        // The logits of the last output, from a node without the session state: any instance.
        for (let attempt = 0; attempt < 100; attempt++) {
          const r = await exchange(url, {agent, path: "/v1/logits", headers: {"content-type": "application/octet-stream"}, chunks: [bytesOf(plan.lastOut)]});
          if (r.status === 200) {
            if (!r.body.equals(plan.logits)) tally.wrong.push(`${session}: logits differ`);
            tally.logits++;
            break;
          }
          if (r.transport) count(tally.transport, r.transport);
          else if (!deliberate.has(`${r.status} ${errorCode(r)}`)) {
            tally.wrong.push(`${session} logits: ${r.status} ${r.body.toString().slice(0, 200)}`);
            break;
          }
          await sleep(100);
        }
        const gone = await exchange(url, {agent, method: "DELETE", path: `/v1/sessions/${session}`});
        if (gone.status !== undefined && ![204, 404, 429, 503].includes(gone.status)) tally.wrong.push(`DELETE ${session}: ${gone.status}`);
        tally.sessions++;
      }
      agent.destroy();
    }

    // Uploads in 4 pieces: 200 ms apart (0.6 s, within the deadline: must be answered right, or
    // be refused deliberately) or 1200 ms apart (3.6 s, beyond it: 408 body_timeout expected).
    const slow = {ok: 0, timedOut: 0, other: []};
    async function slowClient(gapMs, expectTimeout) {
      const s = plans[0].steps[0];
      const body = bytesOf(s.hidden);
      const quarter = Math.ceil(body.length / 4);
      const chunks = [0, 1, 2, 3].map((i) => body.subarray(i * quarter, (i + 1) * quarter));
      for (let n = 0; running(); n++) {
        const r = await exchange(url, {path: `/v1/sessions/slow-${gapMs}-${n}/forward?start_pos=0`, headers: {"content-type": "application/octet-stream"},
          chunks, gapMs, agent: false});
        const what = r.transport ? `transport ${r.transport}` : `${r.status} ${r.status === 200 ? "ok" : errorCode(r)}`;
        if (r.status === 200 && r.body.equals(s.expected) && !expectTimeout) slow.ok++;
        else if (what === "408 body_timeout" && expectTimeout) slow.timedOut++;
        else if (!deliberate.has(what) && !r.transport) slow.other.push(`${gapMs} ms: ${what}`);
        await sleep(100);
      }
    }

    // Clients that go away: mid-upload, right after the first bytes of a large answer (8 MiB of
    // logits), or that stop reading it for longer than the send deadline.
    const rude = {abandonedUploads: 0, abandonedAnswers: 0, stalled: 0};
    async function rudeClient(kind) {
      const rows = new Float32Array(2048 * reference.nEmbd).fill(0.25);
      const body = bytesOf(rows);
      const half = body.length / 2;
      for (let n = 0; running(); n++) {
        if (kind === "upload") {
          const r = await exchange(url, {path: `/v1/sessions/rude-${n}/forward?start_pos=0`, headers: {"content-type": "application/octet-stream"},
            chunks: [body.subarray(0, 256 * 64), body.subarray(256 * 64, 512 * 64)], gapMs: 50, abandonUploadAfter: 1, agent: false});
          if (r.abandoned) rude.abandonedUploads++;
        } else {
          const r = await exchange(url, {path: "/v1/logits", headers: {"content-type": "application/octet-stream"},
            chunks: [body.subarray(0, half), body.subarray(half)], agent: false, abandonAnswer: kind === "answer", stallMs: kind === "stall" ? 2 * SEND_TIMEOUT_MS : 0});
          if (r.abandoned) rude.abandonedAnswers++;
          else if (kind === "stall" && r.status === 200 && (r.transport || r.body?.length < 2048 * 1024 * 4)) rude.stalled++;
        }
        await sleep(200);
      }
    }

    // The restarts, while the clients run: kill or stop the node, start it again on the port.
    const restarts = (async () => {
      for (const [signal, at] of RESTARTS) {
        await sleep(Math.max(0, at - (Date.now() - t0)));
        const {code, signal: by} = await server.stop(signal);
        assert.ok(signal === "SIGKILL" ? by === "SIGKILL" : code === 0, `${signal}: exit ${code ?? by}`);
        server = await start();
        await waitReady(url);
      }
    })();

    await Promise.all([
      ...Array.from({length: SESSION_CLIENTS}, (_, c) => sessionClient(c)),
      slowClient(200, false), slowClient(1200, true),
      rudeClient("upload"), rudeClient("answer"), rudeClient("stall"),
      restarts,
    ]);

    const summary = JSON.stringify({tally, slow, rude}, null, 1);
    assert.deepEqual(tally.wrong, [], summary);
    assert.deepEqual(tally.lost, [], summary);
    assert.deepEqual(slow.other, [], summary);
    assert.ok(tally.sessions >= SESSION_CLIENTS * 3, `only ${tally.sessions} sessions completed: ${summary}`);
    assert.ok(tally.logits >= SESSION_CLIENTS * 3, summary);
    assert.ok(tally.replays > 0, `no session had to be replayed: did the restarts happen under load? ${summary}`);
    assert.ok(slow.ok > 0 && slow.timedOut > 0, summary);
    assert.ok(rude.abandonedUploads > 0 && rude.abandonedAnswers > 0, summary);
    // The node is intact: the last instance answers, its memory stayed bounded, it stops cleanly.
    const metrics = await (await fetch(`${url}/metrics`, {headers: {authorization: `Bearer ${TOKEN}`}})).text();
    const rss = Number(/^process_resident_memory_bytes (\d+)/m.exec(metrics)?.[1]);
    assert.ok(rss < 1024 * 1024 * 1024, `RSS ${rss} bytes after the load`);
    assert.deepEqual(await server.stop(), {code: 0, signal: null});
    for (const [i, instance] of instances.entries()) {
      const errors = instance.logs.filter((l) => l.severity === "ERROR");
      assert.deepEqual(errors, [], `instance ${i} logged errors`);
    }
    t.diagnostic(`load and faults: ${JSON.stringify({sessions: tally.sessions, steps: tally.steps, replays: tally.replays, retries: tally.retriedWithKey,
      statuses: tally.statuses, transport: tally.transport, slow, rude, rssMiB: Math.round(rss / 2 ** 20)})}`);
  });
});
