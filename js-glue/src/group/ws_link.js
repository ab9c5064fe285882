// A member's link to another member in Node (group/peer_exchange.js): a WebSocket client of the
// `ws` library, as member clients dial (memberClientOptions: the bearer token, no compression, a
// zero mask).
import WebSocket from 'ws';

import { memberClientOptions } from '../protocol/member_frames.js';

/**
 * A link to the member WebSocket at `url` (ws: or wss:), once open: {open(), send(bytes),
 * close(), onmessage(bytes, isBinary), onclose()}; rejects saying why not (with the HTTP
 * `status` of a refused upgrade).
 * @example const link = await dialWs('ws://b:8080/v1/member', { authToken, deadlineMs: 30_000 });
 */
export function dialWs(url, { authToken, deadlineMs }) {
  const ws = new WebSocket(url, memberClientOptions(authToken, deadlineMs));
  const link = {
    onmessage: null,
    onclose: null,
    open: () => ws.readyState === WebSocket.OPEN,
    send: (bytes) => ws.send(bytes, { binary: true }),
    close: () => ws.terminate(),
  };
  ws.on('error', () => {});  // what failed is said where the link is awaited, or at the next send
  return new Promise((resolve, reject) => {
    ws.once('unexpected-response', (req, res) => reject(Object.assign(new Error(`HTTP ${res.statusCode}`), { status: res.statusCode })));
    ws.once('error', (error) => reject(error));
    ws.once('close', () => reject(new Error('it closed the connection')));
    ws.once('open', () => {
      ws.on('message', (data, isBinary) => link.onmessage?.(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), isBinary));
      ws.on('close', () => link.onclose?.());
      resolve(link);
    });
  });
}
