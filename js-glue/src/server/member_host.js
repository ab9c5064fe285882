// A member of a tensor-parallel group as a Node process (`serve --shard I/S`): one LocalMember
// behind a WebSocket at /v1/member that the group's leader drives (group/remote_member.js,
// protocol/member_frames.js), /healthz beside it. One call at a time: the leader that began it
// owns it until its end, and a leader that goes away mid-call has it abandoned, its session as
// it was. Without a token it starts on a loopback address only, as a layer node does.
import { createServer } from 'node:http';

import { timingSafeEqual } from 'hono/utils/buffer';
import { WebSocketServer } from 'ws';

import { LocalMember } from '../group/local_member.js';
import { MEMBER_PATH } from '../group/remote_member.js';
import { redactConfig } from '../log/json_log.js';
import { redactDeep, redactSecrets } from '../log/redact.js';
import { processLog } from '../log/readable_log.js';
import { decodeFrame, encodeFrame, isCount, MAX_FRAME_BYTES } from '../protocol/member_frames.js';
import { openSource } from '../sources/open_source.js';
import { threadsAvailable } from '../wasm/load_node.js';
import { LayerfoldError } from '../wasm/capi.js';
import { checkOpenAccess, listen, warnIfOpen } from './node_process.js';

const MAX_SESSION_ID = 256;
const CLOSE_WAIT_MS = 1000;

/**
 * Serves member `index` of a group of `members` over layers [begin, end) of `model`. Returns at
 * once with the listening server; `loaded` settles when the member's slices are in (or failed),
 * `shutdown()` stops accepting leaders and new calls, waits up to shutdownTimeoutMs for the call
 * under way to end, then closes every connection (abandoning a call still running) and frees the
 * member; it resolves with the number of calls abandoned (0 or 1).
 * @param {{model: string, layers: [number, number], shard: [number, number], threads?: number,
 *          build?: 'threaded'|'single', port?: number, host?: string, cacheDir?: string, maxContext?: number,
 *          authToken?: string, insecureNoAuth?: boolean, log?: Function}} options
 * @example const m = await serveMember({ model: 'tiny.gguf', layers: [0, 2], shard: [0, 2], port: 0, host: '127.0.0.1' });
 */
export async function serveMember({ model, layers, shard: [index, members], threads = 1, build, port = 8080, host = '0.0.0.0',
  cacheDir, maxContext = 0, authToken, insecureNoAuth = false, shutdownTimeoutMs = 10_000, log: write = processLog() }) {
  const log = (severity, message, fields = {}) => write(severity, redactSecrets(message), redactDeep(fields));
  checkOpenAccess({ authToken, host, insecureNoAuth }, ' a group member', 'the member');
  log('INFO', 'starting', { config: redactConfig({ model, layers, shard: `${index}/${members}`, threads, build, port, host, cacheDir, maxContext, authToken }) });
  warnIfOpen({ authToken, host, port }, log);

  let member = null;
  let owner = null;  // the socket whose call is under way
  let draining = false;
  let callEnded = () => {};  // resolves the drain's wait when the call under way ends
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
      chain = chain.then(() => answer(ws, data, isBinary));
    });
    ws.on('close', () => {
      sockets.delete(ws);
      if (owner === ws) {
        member.abandon();
        owner = null;
        log('WARNING', 'the leader went away mid-call: abandoned');
      }
    });
  }

  async function answer(ws, data, isBinary) {
    let reply;
    try {
      reply = await frameAnswer(ws, data, isBinary);
    } finally {
      if (owner === null) callEnded();
    }
    if (ws.readyState === ws.OPEN) ws.send(reply, { binary: true });
  }

  async function frameAnswer(ws, data, isBinary) {
    try {
      if (!isBinary) throw new LayerfoldError('bad_frame', 'a text frame');
      const { header, payload } = decodeFrame(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), 'the leader');
      return await run(ws, header, payload);
    } catch (error) {
      return encodeFrame({ op: 'error', code: error.code ?? 'internal', message: error.message });
    }
  }

  async function run(ws, header, payload) {
    const { op } = header;
    if (op === 'info') {
      return encodeFrame({ op: 'info', index, members, layers, n_embd: member.nEmbd, n_layer: member.nLayer, n_vocab: member.nVocab, weight_bytes: member.weightBytes });
    }
    if (op === 'begin') {
      if (draining) throw new LayerfoldError('unavailable', `member ${index} is shutting down`);
      if (owner && owner !== ws) throw new LayerfoldError('unavailable', `member ${index} is running another leader's call`);
      const { session, startPos, rows, perLayer } = header;
      checkSession(session);
      if (!isCount(startPos) || !isCount(rows) || rows === 0 || !isCount(perLayer) || payload.length !== rows * member.nEmbd + perLayer) {
        throw new LayerfoldError('invalid_argument', `a begin of ${payload.length} floats does not hold rows ${rows} of ${member.nEmbd} and ${perLayer} per-layer inputs`);
      }
      owner = ws;
      const hidden = payload.subarray(0, rows * member.nEmbd);
      const piece = await member.begin({ session, startPos, hidden, perLayer: perLayer ? payload.subarray(rows * member.nEmbd) : null })
        .catch((error) => { owner = null; throw error; });
      return encodeFrame({ op: 'piece' }, [piece]);
    }
    if (op === 'exchange') {
      if (owner !== ws) throw new LayerfoldError('failed_precondition', 'no call of this leader is under way');
      const floats = header.floats;
      if (!Array.isArray(floats) || floats.length !== members || !floats.every(isCount) || floats.reduce((a, b) => a + b, 0) !== payload.length) {
        throw new LayerfoldError('invalid_argument', `an exchange of ${payload.length} floats does not hold ${members} pieces as stated`);
      }
      let at = 0;
      const pieces = floats.map((n) => payload.subarray(at, (at += n)));
      const next = await member.exchange(pieces).catch((error) => { owner = null; throw error; });
      if (next.output) {
        owner = null;
        return encodeFrame({ op: 'output' }, [next.output]);
      }
      return encodeFrame({ op: 'piece' }, [next.piece]);
    }
    if (op === 'abandon') {
      if (owner === ws) {
        member.abandon();
        owner = null;
      }
      return encodeFrame({ op: 'ok' });
    }
    if (op === 'length' || op === 'drop') {
      checkSession(header.session);
      if (op === 'length') return encodeFrame({ op: 'length', n_past: member.sessionLength(header.session) });
      if (owner) throw new LayerfoldError('unavailable', `member ${index} is running a call: drop the session after it`);
      member.dropSession(header.session);
      return encodeFrame({ op: 'ok' });
    }
    throw new LayerfoldError('invalid_argument', `unknown op ${JSON.stringify(op)}`);
  }

  const boundPort = await listen(http, port, host);
  log('INFO', 'listening', { host, port: boundPort });
  const loaded = (async () => {
    const source = await openSource(model, { cacheDir });
    try {
      const threaded = build ? build === 'threaded' : threadsAvailable();
      member = await LocalMember.open({ source, index, members, layers, threaded, threads, maxContext });
      log('INFO', 'ready', { weightBytes: member.weightBytes });
    } finally {
      await source.close();
    }
  })();
  loaded.catch((error) => log('ERROR', 'load failed', { error: error.message }));

  async function shutdown() {
    draining = true;
    const closed = new Promise((resolve) => http.close(resolve));
    let timer;
    if (owner) {
      await Promise.race([
        new Promise((resolve) => { callEnded = resolve; }),
        new Promise((resolve) => { timer = setTimeout(resolve, shutdownTimeoutMs); }),
      ]);
      clearTimeout(timer);
    }
    const abandoned = owner ? 1 : 0;
    // A close frame after the answers already sent; a leader that does not close back is cut.
    await Promise.all([...sockets].map((ws) => new Promise((resolve) => {
      const cut = setTimeout(() => ws.terminate(), CLOSE_WAIT_MS);
      ws.once('close', () => { clearTimeout(cut); resolve(); });
      ws.close(1001, 'the member is shutting down');
    })));
    await closed;
    await loaded.catch(() => {});
    member?.close();
    member = null;
    return abandoned;
  }
  return { port: boundPort, url: `http://${host.includes(':') ? `[${host}]` : host}:${boundPort}`, loaded, shutdown };
}

function checkSession(session) {
  if (typeof session !== 'string' || session.length === 0 || session.length > MAX_SESSION_ID) {
    throw new LayerfoldError('invalid_argument', `a session id must be a string of 1 to ${MAX_SESSION_ID} characters`);
  }
}
