// A member's link to another member from a Workers-style isolate (group/peer_exchange.js): a
// WebSocket opened with fetch() and an Upgrade header, as Workers dial one, with the bearer token.

/**
 * A link to the member WebSocket at `url` (ws: or wss:, dialed as http: or https:), once
 * accepted, as group/ws_link.js's dialWs gives one; rejects saying why not (with the HTTP
 * `status` of a refused upgrade), or when no answer comes within deadlineMs.
 * @example const link = await dialFetch('wss://m1.example/v1/member', { authToken, deadlineMs: 30_000 });
 */
export async function dialFetch(url, { authToken, deadlineMs }) {
  const target = new URL(url);
  target.protocol = target.protocol === 'wss:' ? 'https:' : 'http:';
  // Only the upgrade is timed: the signal must not end the WebSocket it opens.
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new Error(`no answer within ${deadlineMs} ms`)), deadlineMs);
  let response;
  try {
    response = await fetch(target, {
      headers: { upgrade: 'websocket', ...(authToken ? { authorization: `Bearer ${authToken}` } : {}) },
      signal: controller.signal,
    });
  } finally {
    clearTimeout(timer);
  }
  const ws = response.webSocket;
  if (!ws) throw Object.assign(new Error(`HTTP ${response.status}`), { status: response.status });
  ws.accept();
  let open = true;
  const link = {
    onmessage: null,
    onclose: null,
    open: () => open,
    send: (bytes) => ws.send(bytes),
    close: () => {
      open = false;
      try {
        ws.close(1000, 'closed');
      } catch {
        // closed already
      }
    },
  };
  ws.addEventListener('message', ({ data }) => {
    const binary = typeof data !== 'string';
    link.onmessage?.(binary ? new Uint8Array(data) : new TextEncoder().encode(data), binary);
  });
  for (const event of ['close', 'error']) {
    ws.addEventListener(event, () => {
      open = false;
      link.onclose?.();
    });
  }
  return link;
}
