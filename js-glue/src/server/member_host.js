// A member of a tensor-parallel group as a Node process (`serve --shard I/S`): one LocalMember
// behind a WebSocket at /v1/member that the group's leader drives (group/remote_member.js,
// protocol/member_frames.js), /healthz beside it, and the group's other members' links there when
// they exchange member to member (group/peer_exchange.js). One call at a time: the leader that
// began it owns it until its end, and a leader that goes away mid-call has it abandoned, its
// session as it was. Without a token it starts on a loopback address only, as a layer node does.
import { createServer } from 'node:http';

import { timingSafeEqual } from 'hono/utils/buffer';
import { WebSocketServer } from 'ws';

import { openLocalMember } from '../group/open_local_member.js';
import { MemberService } from '../group/member_service.js';
import { PeerExchange } from '../group/peer_exchange.js';
import { dialWs } from '../group/ws_link.js';
import { redactConfig } from '../log/json_log.js';
import { redactDeep, redactSecrets } from '../log/redact.js';
import { processLog } from '../log/readable_log.js';
import { MAX_FRAME_BYTES, MEMBER_PATH } from '../protocol/member_frames.js';
import { openSource } from '../sources/open_source.js';
import { threadsAvailable } from '../wasm/load_node.js';
import { checkOpenAccess, listen, warnIfOpen } from './node_process.js';

const CLOSE_WAIT_MS = 1000;

/**
 * Serves member `index` of a group of `members` over layers [begin, end) of `model`. Returns at
 * once with the listening server; `loaded` settles when the member's slices are in (or failed),
 * `shutdown()` stops accepting leaders and new calls, waits up to shutdownTimeoutMs for the call
 * under way to end, then closes every connection (abandoning a call still running) and frees the
 * member; it resolves with the number of calls abandoned (0 or 1).
 * @param {{model: string, layers: [number, number], shard: [number, number], threads?: number,
 *          build?: 'threaded'|'single', port?: number, host?: string, cacheDir?: string, maxContext?: number,
 *          cacheTypeK?: string, cacheTypeV?: string, dotForm?: 'dot-add'|'pairs', ends?: boolean, authToken?: string, insecureNoAuth?: boolean,
 *          log?: Function}} options
 *   ends: hold the model's ends the layers touch, a slice of the vocabulary (LocalMember.open);
 *   dotForm: force the relaxed kernels' form of the Q4_0 dot product (loadThreadedModule).
 * @example const m = await serveMember({ model: 'tiny.gguf', layers: [0, 2], shard: [0, 2], port: 0, host: '127.0.0.1' });
 */
export async function serveMember({ model, layers, shard: [index, members], threads = 1, build, port = 8080, host = '0.0.0.0',
  cacheDir, maxContext = 0, cacheTypeK, cacheTypeV, dotForm, ends = false, authToken, insecureNoAuth = false, shutdownTimeoutMs = 10_000, log: write = processLog() }) {
  const log = (severity, message, fields = {}) => write(severity, redactSecrets(message), redactDeep(fields));
  checkOpenAccess({ authToken, host, insecureNoAuth }, ' a group member', 'the member');
  log('INFO', 'starting', { config: redactConfig({ model, layers, shard: `${index}/${members}`, threads, build, port, host, cacheDir, maxContext, cacheTypeK, cacheTypeV, ends, authToken }) });
  warnIfOpen({ authToken, host, port }, log);

  let member = null;
  let service = null;
  let peers = null;
  let draining = false;
  const sockets = new Set();
  const http = createServer((req, res) => {
    const ready = req.url === '/healthz' && member !== null;
    res.writeHead(req.url === '/healthz' ? (ready ? 200 : 503) : 404, { 'content-type': 'text/plain' });
    res.end(req.url === '/healthz' ? (ready ? 'ok\n' : 'loading\n') : 'not found\n');
  });
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES, perMessageDeflate: false });
  http.on('upgrade', async (req, socket, head) => {
    const refuse = (status, text) => {
      socket.end(`HTTP/1.1 ${status} ${text}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`);
    };
    if (new URL(req.url, 'http://member').pathname !== MEMBER_PATH) return refuse(404, 'Not Found');
    if (authToken !== undefined) {
      const match = /^Bearer (.+)$/.exec(req.headers.authorization ?? '');
      if (!match || !(await timingSafeEqual(authToken, match[1]))) return refuse(401, 'Unauthorized');
    }
    if (!member || draining) return refuse(503, 'Service Unavailable');
    wss.handleUpgrade(req, socket, head, (ws) => attach(ws));
  });

  function attach(ws) {
    sockets.add(ws);
    let chain = Promise.resolve();
    ws.on('message', (data, isBinary) => {
      chain = chain.then(async () => {
        const reply = await service.answer(ws, new Uint8Array(data.buffer, data.byteOffset, data.byteLength), isBinary);
        if (reply && ws.readyState === ws.OPEN) ws.send(reply, { binary: true });
      });
    });
    ws.on('close', () => {
      sockets.delete(ws);
      service.disconnected(ws);
    });
  }

  const boundPort = await listen(http, port, host);
  log('INFO', 'listening', { host, port: boundPort });
  const loaded = (async () => {
    const source = await openSource(model, { cacheDir });
    try {
      const threaded = build ? build === 'threaded' : threadsAvailable();
      member = await openLocalMember({ source, index, members, layers, threaded, threads, dotForm, maxContext, cacheTypeK, cacheTypeV, ends });
      peers = new PeerExchange({ index, members, layers, authToken, dial: dialWs });
      service = new MemberService(member, { log, peers });
      log('INFO', 'ready', { weightBytes: member.weightBytes });
    } finally {
      await source.close();
    }
  })();
  loaded.catch((error) => log('ERROR', 'load failed', { error: error.message }));

  async function shutdown() {
    draining = true;
    const closed = new Promise((resolve) => http.close(resolve));
    const abandoned = service ? await service.drain(shutdownTimeoutMs) : 0;
    // A close frame after the answers already sent; a leader that does not close back is cut.
    await Promise.all([...sockets].map((ws) => new Promise((resolve) => {
      const cut = setTimeout(() => ws.terminate(), CLOSE_WAIT_MS);
      ws.once('close', () => { clearTimeout(cut); resolve(); });
      ws.close(1001, 'the member is shutting down');
    })));
    await closed;
    await loaded.catch(() => {});
    peers?.close();
    member?.close();
    member = null;
    return abandoned;
  }
  return { port: boundPort, url: `http://${host.includes(':') ? `[${host}]` : host}:${boundPort}`, loaded, shutdown };
}
