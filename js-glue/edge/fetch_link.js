// A member's link to another member from a Workers-style isolate (group/peer_exchange.js): a
// WebSocket opened with fetch() and an Upgrade header, as Workers dial one, with the bearer token.

/**
 * A link to the member WebSocket at `url` (ws: or wss:, dialed as http: or https:), once
 * accepted; rejects saying why not.
 * @example const link = await dialFetch('wss://m1.example/v1/member', { authToken });
 */
export async function dialFetch(url, { authToken }) {
  const target = new URL(url);
  target.protocol = target.protocol === 'wss:' ? 'https:' : 'http:';
  const response = await fetch(target, { headers: { upgrade: 'websocket', ...(authToken ? { authorization: `Bearer ${authToken}` } : {}) } });
  const ws = response.webSocket;
  if (!ws) throw new Error(`HTTP ${response.status}`);
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
  ws.addEventListener('message', ({ data }) => link.onmessage?.(typeof data === 'string' ? new TextEncoder().encode(data) : new Uint8Array(data)));
  for (const event of ['close', 'error']) {
    ws.addEventListener(event, () => {
      open = false;
      link.onclose?.();
    });
  }
  return link;
}
