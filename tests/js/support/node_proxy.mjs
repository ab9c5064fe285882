// A node:http proxy on 127.0.0.1 in front of a real `layerfold serve` node, for the tests that
// change what a node answers (hostile_proxy.mjs spoils answers, steering_proxy.mjs steers logits):
// the request is read whole, then `handle` decides, with forward() to get the node's answer.
import http from "node:http";

/**
 * The proxy's URL; `t.after` closes it. handle(req, res, forward): forward() passes the request
 * on and resolves to {upstream (a fetch Response), body (a Buffer)}. A failure of the node or of
 * handle answers 599, or ends the connection if an answer was under way.
 * @example const url = await startNodeProxy(t, server.url, async (req, res, forward) => passOn(res, await forward()));
 */
export async function startNodeProxy(t, target, handle) {
  const server = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const forward = async () => {
      const headers = {...req.headers};
      delete headers.host;
      delete headers["content-length"];
      const upstream = await fetch(`${target}${req.url}`, {method: req.method, headers, body: chunks.length ? Buffer.concat(chunks) : undefined});
      return {upstream, body: Buffer.from(await upstream.arrayBuffer())};
    };
    try {
      await handle(req, res, forward);
    } catch (error) {
      if (!res.headersSent) res.writeHead(599).end(String(error.message));
      else res.destroy();
    }
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => new Promise((resolve) => {
    server.closeAllConnections();
    server.close(resolve);
  }));
  return `http://127.0.0.1:${server.address().port}`;
}

/** Answers with the node's status, headers and `body` (Content-Length set to its size). */
export function passOn(res, {upstream, body}) {
  const passed = Object.fromEntries([...upstream.headers].filter(([name]) => !["content-length", "transfer-encoding", "connection", "keep-alive"].includes(name)));
  res.writeHead(upstream.status, {...passed, "content-length": body.length}).end(body);
}
