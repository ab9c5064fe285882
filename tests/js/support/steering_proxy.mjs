// A proxy in front of the `layerfold serve` node that holds the LM head, for agent-loop tests
// that need the real engine to write a given text (a tool call, then an answer) that random
// weights never would: every request passes through to the node, which computes as usual, and
// each POST /v1/logits answer gets the next token of a script raised above the row's largest
// logit, as a logit_bias that moves with the position would. Between scripts (before a script is
// set, after it ran out) the node's logits pass unchanged.
import http from "node:http";

/**
 * {url, steer(ids), steered}: steer(ids) makes the next ids.length logits answers pick ids in
 * order; steered counts the rows raised. `t.after` closes it.
 * @example const proxy = await startSteeringProxy(t, server.url); proxy.steer(tokenizer.encode(text, {addBos: false, parseSpecial: true}));
 */
export async function startSteeringProxy(t, target) {
  let script = [];
  const state = {steered: 0};
  const server = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    try {
      const headers = {...req.headers};
      delete headers.host;
      delete headers["content-length"];
      const upstream = await fetch(`${target}${req.url}`, {method: req.method, headers, body: chunks.length ? Buffer.concat(chunks) : undefined});
      const body = Buffer.from(await upstream.arrayBuffer());
      const passed = Object.fromEntries([...upstream.headers].filter(([name]) => !["content-length", "transfer-encoding", "connection", "keep-alive"].includes(name)));
      if (req.url.startsWith("/v1/logits") && upstream.ok && script.length > 0) steerRow(body, script.shift(), state);
      res.writeHead(upstream.status, {...passed, "content-length": body.length}).end(body);
    } catch (error) {
      if (!res.headersSent) res.writeHead(599).end(String(error.message));
      else res.destroy();
    }
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    steer(ids) { script = [...ids]; },
    get steered() { return state.steered; },
  };
}

// The answer is one row of n_vocab little-endian floats per position asked; the gateway asks
// for the last position only, so its one row is the row steered.
function steerRow(body, id, state) {
  const row = new Float32Array(body.buffer, body.byteOffset, body.length / 4);
  if (id >= row.length) throw new Error(`steered token ${id} is outside the row of ${row.length} logits`);
  row[id] = row.reduce((max, x) => Math.max(max, x), -Infinity) + 10;
  state.steered++;
}
