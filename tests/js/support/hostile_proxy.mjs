// A hostile layer node for the gateway tests: a node:http proxy on 127.0.0.1 in front of a real
// `layerfold serve` node, passing requests through until told to spoil the answers of one path:
// a value turned NaN, Inf or huge, the body truncated, inflated (with a Content-Length of the
// inflated size, or chunked without one), held past any deadline, or the connection reset as a
// dead node's would be. Inflated bodies are written from one reused buffer as the reader takes
// them, so the proxy itself holds no more than a chunk.
import {passOn, startNodeProxy} from "./node_proxy.mjs";

const INFLATED_BYTES = 600 * 1024 * 1024;
const FILLER = Buffer.alloc(1 << 20, 0x41);
// How long a held answer is held at most: longer than any deadline under test.
const HOLD_MS = 60_000;

// The value put at float index 1 of an answer (0 is often the first row's first column).
const SPOILED_VALUE = {nan: NaN, inf: Infinity, huge: 3e38};

// Writes FILLER until `bytes` are written or the reader went away.
async function fill(res, bytes) {
  for (let sent = 0; sent < bytes && !res.destroyed; sent += FILLER.length) {
    if (!res.write(FILLER)) await new Promise((resolve) => { res.once("drain", resolve); res.once("close", resolve); });
  }
  res.end();
}

async function spoil(action, upstream, body, res) {
  const headers = {"content-type": upstream.headers.get("content-type") ?? "application/octet-stream"};
  if (action in SPOILED_VALUE) {
    const copy = Buffer.from(body);
    copy.writeFloatLE(SPOILED_VALUE[action], 4);
    res.writeHead(upstream.status, {...headers, "content-length": copy.length}).end(copy);
  } else if (action === "truncate") {
    res.writeHead(upstream.status, {...headers, "content-length": body.length - 4}).end(body.subarray(0, body.length - 4));
  } else if (action === "inflate") {
    res.writeHead(upstream.status, {...headers, "content-length": INFLATED_BYTES});
    await fill(res, INFLATED_BYTES);
  } else if (action === "inflate-chunked") {
    res.writeHead(upstream.status, headers);
    res.write(body);
    await fill(res, INFLATED_BYTES);
  } else {
    throw new Error(`unknown action ${action}`);
  }
}

/**
 * A proxy to `target` (a layer node's URL): {url, spoil(path, action), pass(), hits}. `t.after`
 * closes it. action: "nan" | "inf" | "huge" | "truncate" | "inflate" | "inflate-chunked" |
 * "hold" | "reset"; path: a RegExp of the request paths it applies to; hits counts them.
 * @example const proxy = await startHostileProxy(t, server.url); proxy.spoil(/\/v1\/logits/, "nan");
 */
export async function startHostileProxy(t, target) {
  let rule = null;
  const state = {hits: 0};
  const url = await startNodeProxy(t, target, async (req, res, forward) => {
    const active = rule && rule.path.test(req.url) ? rule.action : null;
    if (active) state.hits++;
    if (active === "reset") return req.socket.destroy();
    if (active === "hold") {
      const timer = setTimeout(() => res.destroy(), HOLD_MS);
      res.once("close", () => clearTimeout(timer));
      return;
    }
    const answer = await forward();
    if (active && answer.upstream.ok) return await spoil(active, answer.upstream, answer.body, res);
    passOn(res, answer);
  });
  return {
    url,
    spoil(path, action) {
      rule = {path, action};
    },
    pass() {
      rule = null;
    },
    get hits() {
      return state.hits;
    },
  };
}
