// Malformed and hostile requests against a layer node, each with the status and error code the
// protocol (docs/http-api.md) promises. Shared by the Node container's tests and the edge
// worker's: runHostileTable(baseUrl, ...) works against any node serving the HTTP API.
import net from "node:net";

const F32 = 4;

// A raw HTTP/1.1 exchange for what fetch will not send (lying Content-Length, chunked bodies,
// un-normalized paths): writes `parts` in order, returns the first response's status and JSON error.
async function raw(baseUrl, parts, timeoutMs = 10_000) {
  const {hostname, port} = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname);
    let data = Buffer.alloc(0);
    const timer = setTimeout(() => finish(), timeoutMs);
    function finish() {
      clearTimeout(timer);
      socket.destroy();
      const text = data.toString("latin1");
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
      const headEnd = text.indexOf("\r\n\r\n");
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(text.slice(0, headEnd))?.[1] ?? 0);
      const body = headEnd < 0 ? "" : data.subarray(headEnd + 4, headEnd + 4 + length).toString();
      let code = null;
      try { code = JSON.parse(body).error?.code ?? null; } catch { /* not JSON */ }
      if (status === 0) reject(new Error(`no HTTP response from ${baseUrl}: ${JSON.stringify(text.slice(0, 200))}`));
      else resolve({status, code});
    }
    socket.on("connect", () => { for (const part of parts) socket.write(part); });
    socket.on("data", (chunk) => {
      data = Buffer.concat([data, chunk]);
      const text = data.toString("latin1");
      const headEnd = text.indexOf("\r\n\r\n");
      if (headEnd < 0) return;
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(text.slice(0, headEnd))?.[1] ?? 0);
      if (data.length >= headEnd + 4 + length) finish();
    });
    socket.on("error", () => finish());
    socket.on("end", () => finish());
  });
}

function head(method, target, {token, headers = {}} = {}) {
  const lines = [`${method} ${target} HTTP/1.1`, "Host: layer-node", "Connection: close",
    ...(token ? [`Authorization: Bearer ${token}`] : []), ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)];
  return `${lines.join("\r\n")}\r\n\r\n`;
}

async function call(baseUrl, method, target, {token, body, type = "application/octet-stream", headers = {}} = {}) {
  const response = await fetch(`${baseUrl}${target}`, {
    method,
    headers: {...(type && body !== undefined ? {"content-type": type} : {}), ...(token ? {authorization: `Bearer ${token}`} : {}), ...headers},
    body,
  });
  const text = await response.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  const error = json?.error ?? null;
  return {status: response.status, code: error?.code ?? null, error, json, headers: response.headers};
}

const rows = (n, nEmbd, fill = 0.25) => Buffer.from(new Float32Array(n * nEmbd).fill(fill).buffer);
function withValue(n, nEmbd, index, value) {
  const floats = new Float32Array(n * nEmbd).fill(0.25);
  floats[index] = value;
  return Buffer.from(floats.buffer);
}

/**
 * The table: [{name, status, code, send(ctx)}] (code: one code, or the list of acceptable ones), ctx = {baseUrl, token, session, nPast, info}
 * where `session` is a session the node holds at n_past = nPast and info is GET /v1/info.
 */
export function hostileCases(info) {
  const e = info.n_embd;
  const row = rows(1, e);
  const fwd = (ctx, query, options = {}) => call(ctx.baseUrl, "POST", `/v1/sessions/${options.id ?? ctx.session}/forward?${query}`, {token: ctx.token, body: row, ...options});
  const at = (ctx) => `start_pos=${ctx.nPast}`;
  const overLimit = info.max_tokens * e * F32 + 4;
  const cases = [
    // authentication
    ["no token", 401, "unauthorized", (ctx) => fwd(ctx, at(ctx), {token: null})],
    ["wrong token", 401, "unauthorized", (ctx) => fwd(ctx, at(ctx), {token: `${ctx.token}x`})],
    ["token prefix", 401, "unauthorized", (ctx) => fwd(ctx, at(ctx), {token: ctx.token.slice(0, -1)})],
    ["Basic scheme", 401, "unauthorized", (ctx) => fwd(ctx, at(ctx), {token: null, headers: {authorization: `Basic ${ctx.token}`}})],
    ["metrics without token", 401, "unauthorized", (ctx) => call(ctx.baseUrl, "GET", "/metrics")],
    ["info without token", 401, "unauthorized", (ctx) => call(ctx.baseUrl, "GET", "/v1/info")],
    // body lengths and values
    ["empty body", 400, "bad_length", (ctx) => fwd(ctx, at(ctx), {body: Buffer.alloc(0)})],
    ["a row short of a float", 400, "bad_length", (ctx) => fwd(ctx, at(ctx), {body: rows(1, e).subarray(4)})],
    ["a row and 2 bytes", 400, "bad_length", (ctx) => fwd(ctx, at(ctx), {body: Buffer.concat([rows(1, e), Buffer.alloc(2)])})],
    ["3 bytes", 400, "bad_length", (ctx) => fwd(ctx, at(ctx), {body: Buffer.alloc(3)})],
    ["NaN in the second row", 400, "not_finite", (ctx) => fwd(ctx, at(ctx), {body: withValue(2, e, e + 3, NaN)})],
    ["+Inf", 400, "not_finite", (ctx) => fwd(ctx, at(ctx), {body: withValue(1, e, 0, Infinity)})],
    ["-Inf in the last float", 400, "not_finite", (ctx) => fwd(ctx, at(ctx), {body: withValue(1, e, e - 1, -Infinity)})],
    ["body above max_tokens rows", 413, "too_large", (ctx) => fwd(ctx, at(ctx), {body: Buffer.alloc(overLimit)})],
    ["Content-Length of 1 TB, no body", 413, "too_large", (ctx) => raw(ctx.baseUrl, [head("POST", `/v1/sessions/${ctx.session}/forward?${at(ctx)}`,
      {token: ctx.token, headers: {"Content-Type": "application/octet-stream", "Content-Length": String(1e12)}})])],
    // Exactly overLimit bytes and no final chunk: the node has read all that was sent when it
    // refuses, so its closing the connection cannot reset it before the answer arrives.
    ["chunked body beyond the limit", 413, "too_large", (ctx) => {
      const size = 64 * 1024;
      const chunks = [];
      for (let sent = 0; sent < overLimit; sent += size) {
        const n = Math.min(size, overLimit - sent);
        chunks.push(Buffer.concat([Buffer.from(`${n.toString(16)}\r\n`), Buffer.alloc(n), Buffer.from("\r\n")]));
      }
      return raw(ctx.baseUrl, [head("POST", `/v1/sessions/${ctx.session}/forward?${at(ctx)}`,
        {token: ctx.token, headers: {"Content-Type": "application/octet-stream", "Transfer-Encoding": "chunked"}}), ...chunks]);
    }],
    // The node reads the announced 6 bytes (400 bad_length); the rest is a malformed next request,
    // which the HTTP server may refuse first (400 without a JSON body).
    ["body longer than its Content-Length", 400, ["bad_length", null], (ctx) => raw(ctx.baseUrl, [head("POST", `/v1/sessions/${ctx.session}/forward?${at(ctx)}`,
      {token: ctx.token, headers: {"Content-Type": "application/octet-stream", "Content-Length": "6"}}), rows(2, e)])],
    ["content type text/plain", 415, "bad_content_type", (ctx) => fwd(ctx, at(ctx), {type: "text/plain"})],
    ["no content type", 415, "bad_content_type", (ctx) => fwd(ctx, at(ctx), {type: null})],
    // session ids and paths
    ["id ..%2F..", 400, "bad_session_id", (ctx) => fwd(ctx, at(ctx), {id: "..%2F.."})],
    ["id a%2Fb", 400, "bad_session_id", (ctx) => fwd(ctx, at(ctx), {id: "a%2Fb"})],
    ["id with a NUL", 400, "bad_session_id", (ctx) => fwd(ctx, at(ctx), {id: "a%00b"})],
    ["id with a space", 400, "bad_session_id", (ctx) => fwd(ctx, at(ctx), {id: "a%20b"})],
    ["id of 129 characters", 400, "bad_session_id", (ctx) => fwd(ctx, at(ctx), {id: "a".repeat(129)})],
    ["id .. sent raw", 404, "not_found", (ctx) => raw(ctx.baseUrl, [head("POST", `/v1/sessions/../forward?${at(ctx)}`,
      {token: ctx.token, headers: {"Content-Type": "application/octet-stream", "Content-Length": String(row.length)}}), row])],
    ["id %2E%2E sent raw", 404, "not_found", (ctx) => raw(ctx.baseUrl, [head("POST", `/v1/sessions/%2E%2E/forward?${at(ctx)}`,
      {token: ctx.token, headers: {"Content-Type": "application/octet-stream", "Content-Length": String(row.length)}}), row])],
    ["id ... (only dots)", 400, "bad_session_id", (ctx) => fwd(ctx, at(ctx), {id: "..."})],
    ["trailing path segment", 404, "not_found", (ctx) => call(ctx.baseUrl, "POST", `/v1/sessions/${ctx.session}/forward/x?${at(ctx)}`, {token: ctx.token, body: row})],
    ["doubled slash", 404, "not_found", (ctx) => call(ctx.baseUrl, "POST", `/v1//sessions/${ctx.session}/forward?${at(ctx)}`, {token: ctx.token, body: row})],
    ["upper-case route", 404, "not_found", (ctx) => call(ctx.baseUrl, "GET", "/V1/INFO", {token: ctx.token})],
    // parameters
    ["no start_pos", 400, "bad_parameter", (ctx) => fwd(ctx, "")],
    ["start_pos=-1", 400, "bad_parameter", (ctx) => fwd(ctx, "start_pos=-1")],
    ["start_pos=1.5", 400, "bad_parameter", (ctx) => fwd(ctx, "start_pos=1.5")],
    ["start_pos=1e3", 400, "bad_parameter", (ctx) => fwd(ctx, "start_pos=1e3")],
    ["start_pos=0x1", 400, "bad_parameter", (ctx) => fwd(ctx, "start_pos=0x1")],
    ["start_pos of 21 digits", 400, "bad_parameter", (ctx) => fwd(ctx, "start_pos=100000000000000000000")],
    ["start_pos empty", 400, "bad_parameter", (ctx) => fwd(ctx, "start_pos=")],
    ["last_only=2", 400, "bad_parameter", (ctx) => fwd(ctx, `${at(ctx)}&last_only=2`)],
    ["start_pos at the max context", 400, "context_full", (ctx) => fwd(ctx, `start_pos=${info.max_context}`)],
    ["exit state with exit_layer \"x\"", 400, "bad_parameter", (ctx) => fwd(ctx, `${at(ctx)}&early_exit=1`,
      {headers: {"x-layerfold-exit-state": "{\"exit_layer\":\"x\",\"recent_updates\":[]}"}})],
    ["exit state with 17 updates", 400, "bad_parameter", (ctx) => fwd(ctx, `${at(ctx)}&early_exit=1`,
      {headers: {"x-layerfold-exit-state": JSON.stringify({exit_layer: -1, recent_updates: new Array(17).fill(0.1)})}})],
    ["a new session with a bad exit state", 400, "bad_parameter", (ctx) => fwd(ctx, "start_pos=0&early_exit=1",
      {id: "never-created", headers: {"x-layerfold-exit-state": "{\"exit_layer\":-2}"}})],
    ["Idempotency-Key of 129 characters", 400, "bad_parameter", (ctx) => fwd(ctx, at(ctx), {headers: {"idempotency-key": "k".repeat(129)}})],
    // positions and sessions
    ["start_pos one ahead", 409, "position_mismatch", (ctx) => fwd(ctx, `start_pos=${ctx.nPast + 1}`)],
    ["start_pos 0 on a held session", 409, "position_mismatch", (ctx) => fwd(ctx, "start_pos=0")],
    ["start_pos one behind", 409, "position_mismatch", (ctx) => fwd(ctx, `start_pos=${ctx.nPast - 1}`)],
    ["unknown session at start_pos 3", 404, "unknown_session", (ctx) => fwd(ctx, "start_pos=3", {id: "never-seen"})],
    ["GET an unknown session", 404, "unknown_session", (ctx) => call(ctx.baseUrl, "GET", "/v1/sessions/never-seen", {token: ctx.token})],
    ["DELETE an unknown session", 404, "unknown_session", (ctx) => call(ctx.baseUrl, "DELETE", "/v1/sessions/never-seen", {token: ctx.token})],
    // routes and methods
    ["unknown route", 404, "not_found", (ctx) => call(ctx.baseUrl, "GET", "/v1/nope", {token: ctx.token})],
    ["root", 404, "not_found", (ctx) => call(ctx.baseUrl, "GET", "/", {token: ctx.token})],
    ["POST /v1/info", 405, "method_not_allowed", (ctx) => call(ctx.baseUrl, "POST", "/v1/info", {token: ctx.token, body: row})],
    ["PUT a session", 405, "method_not_allowed", (ctx) => call(ctx.baseUrl, "PUT", `/v1/sessions/${ctx.session}`, {token: ctx.token, body: row})],
    ["GET forward", 405, "method_not_allowed", (ctx) => call(ctx.baseUrl, "GET", `/v1/sessions/${ctx.session}/forward?${at(ctx)}`, {token: ctx.token})],
    ["DELETE /v1/embed", 405, "method_not_allowed", (ctx) => call(ctx.baseUrl, "DELETE", "/v1/embed", {token: ctx.token})],
    ["GET /v1/per-layer-inputs", 405, "method_not_allowed", (ctx) => call(ctx.baseUrl, "GET", "/v1/per-layer-inputs", {token: ctx.token})],
  ];
  const embed = (ctx, body, type = "application/json") => call(ctx.baseUrl, "POST", "/v1/embed", {token: ctx.token, body, type});
  const logits = (ctx, query, body = row) => call(ctx.baseUrl, "POST", `/v1/logits${query}`, {token: ctx.token, body});
  if (!info.has_embed) {
    cases.push(
      ["embed on a node without the embedding", 404, "not_found", (ctx) => embed(ctx, "{\"tokens\":[2]}")],
      ["per-layer inputs on a node without the embedding", 404, "not_found", (ctx) => call(ctx.baseUrl, "POST", "/v1/per-layer-inputs", {token: ctx.token, body: row})],
    );
  }
  else {
    cases.push(
      ["embed: token id n_vocab", 400, "bad_parameter", (ctx) => embed(ctx, JSON.stringify({tokens: [2, info.n_vocab]}))],
      ["embed: token id -1", 400, "bad_parameter", (ctx) => embed(ctx, "{\"tokens\":[-1]}")],
      ["embed: token id 1.5", 400, "bad_parameter", (ctx) => embed(ctx, "{\"tokens\":[1.5]}")],
      ["embed: no tokens", 400, "bad_parameter", (ctx) => embed(ctx, "{\"tokens\":[]}")],
      ["embed: tokens not an array", 400, "bad_parameter", (ctx) => embed(ctx, "{\"tokens\":\"2,3\"}")],
      ["embed: too many tokens", 400, "bad_parameter", (ctx) => embed(ctx, JSON.stringify({tokens: new Array(info.max_tokens + 1).fill(2)}))],
      ["embed: not JSON", 400, "bad_parameter", (ctx) => embed(ctx, "{tokens:")],
      ["embed: octet-stream", 415, "bad_content_type", (ctx) => embed(ctx, "{\"tokens\":[2]}", "application/octet-stream")],
    );
  }
  if (!info.has_head) cases.push(["logits on a node without the head", 404, "not_found", (ctx) => logits(ctx, "")]);
  else {
    cases.push(
      ["logits: top_k=0", 400, "bad_parameter", (ctx) => logits(ctx, "?top_k=0")],
      ["logits: top_k above n_vocab", 400, "bad_parameter", (ctx) => logits(ctx, `?top_k=${info.n_vocab + 1}`)],
      ["logits: top_k=abc", 400, "bad_parameter", (ctx) => logits(ctx, "?top_k=abc")],
      ["logits: bad length", 400, "bad_length", (ctx) => logits(ctx, "", Buffer.alloc(6))],
      ["logits: NaN", 400, "not_finite", (ctx) => logits(ctx, "", withValue(1, e, 1, NaN))],
    );
  }
  return cases.map(([name, status, code, send]) => ({name, status, code, send}));
}

/**
 * Sends every hostile request to the node at baseUrl, whose session `session` is at n_past =
 * nPast; after each one calls afterEach({name, nPast}) (e.g. a good request on the same
 * session, which returns the session's new n_past). Returns [{name, pass, expected, actual,
 * errorNPast, sessionNPast, nPastBefore}]: {status, code} expected and received, the n_past of a
 * 409's error, and the session's n_past (GET /v1/sessions/{id}) after the request vs before it.
 * @example const results = await runHostileTable(url, {token, session: "h", nPast: 3, afterEach: step});
 */
export async function runHostileTable(baseUrl, {token, session, nPast, afterEach = async ({nPast: p}) => p}) {
  const info = await (await fetch(`${baseUrl}/v1/info`, {headers: {authorization: `Bearer ${token}`}})).json();
  const results = [];
  let current = nPast;
  for (const c of hostileCases(info)) {
    const actual = await c.send({baseUrl, token, session, nPast: current, info});
    const held = await call(baseUrl, "GET", `/v1/sessions/${session}`, {token});
    const pass = actual.status === c.status && [c.code].flat().includes(actual.code);
    results.push({name: c.name, pass, expected: {status: c.status, code: c.code}, actual: {status: actual.status, code: actual.code},
      errorNPast: actual.error?.n_past, sessionNPast: held.json?.n_past ?? null, nPastBefore: current});
    current = await afterEach({name: c.name, nPast: current});
  }
  return results;
}
