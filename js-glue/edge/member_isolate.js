// The edge worker as a member of a tensor-parallel group (SHARD=I/S with LAYERS): its member
// loads once per isolate, on the first request, and a group's leader drives it over a WebSocket
// at /v1/member (group/member_service.js: the frames `serve --shard` answers), with the bearer
// AUTH_TOKEN checked on the upgrade. Given its peers, it dials the other members' /v1/member
// with the same token (edge/fetch_link.js) and exchanges pieces with them member to member, as a
// member server does. /healthz answers at once; /readyz says whether the member is in. A member
// that cannot fit the isolate's budget answers 503 over_budget with the bytes.
import { timingSafeEqual } from 'hono/utils/buffer';

import { MemberService } from '../src/group/member_service.js';
import { PeerExchange } from '../src/group/peer_exchange.js';
import { MEMBER_PATH } from '../src/protocol/member_frames.js';
import { edgeConfig } from './edge_config.js';
import { openEdgeMember } from './edge_member.js';
import { dialFetch } from './fetch_link.js';

/**
 * A fetch handler for one isolate's member, loaded with the worker's settings (edgeConfig) on
 * first use; a bad setting answers 503 naming it.
 * @example const handle = memberIsolate(env, { module: wasm, relaxedModule: wasmRelaxed }); return handle(request, ctx);
 */
export function memberIsolate(env, { module, relaxedModule }) {
  let config = {};
  let service = null;
  let failure = null;
  const loading = (async () => {
    config = edgeConfig(env);
    const member = await openEdgeMember({ module, relaxedModule, ...config });
    const [index, members] = config.shard;
    const peers = new PeerExchange({ index, members, layers: member.layers, authToken: config.authToken, dial: dialFetch });
    service = new MemberService(member, { peers });
  })().catch((error) => {
    failure = error;
  });

  return async (request, ctx) => {
    ctx.waitUntil(loading);
    const path = new URL(request.url).pathname;
    if (path === '/healthz') return Response.json({ ok: true });
    if (path === '/readyz') {
      if (!service && !failure) return Response.json({ ready: false }, { status: 503 });
    } else if (path !== MEMBER_PATH) {
      return new Response('not found\n', { status: 404 });
    }
    await loading;
    if (failure) {
      const overBudget = failure.code === 'over_budget';
      const error = overBudget
        ? { code: 'over_budget', message: failure.message, needed_bytes: failure.neededBytes, available_bytes: failure.availableBytes }
        : { code: 'not_ready', message: `the member failed to load: ${failure.message}` };
      return Response.json({ error }, { status: 503 });
    }
    if (path === '/readyz') return Response.json({ ready: true });
    if (config.authToken !== undefined) {
      const match = /^Bearer (.+)$/.exec(request.headers.get('authorization') ?? '');
      if (!match || !(await timingSafeEqual(config.authToken, match[1]))) return new Response('unauthorized\n', { status: 401 });
    }
    if (request.headers.get('upgrade') !== 'websocket') return new Response('expected a WebSocket upgrade\n', { status: 426 });
    const [client, server] = Object.values(new WebSocketPair());
    server.accept();
    let chain = Promise.resolve();
    server.addEventListener('message', ({ data }) => {
      chain = chain.then(async () => {
        const binary = typeof data !== 'string';
        const reply = await service.answer(server, binary ? new Uint8Array(data) : new TextEncoder().encode(data), binary);
        try {
          if (reply) server.send(reply);
        } catch {
          // the leader closed meanwhile: disconnected() has abandoned its call
        }
      });
    });
    // Closing back completes the close handshake, which ends the request.
    server.addEventListener('close', () => {
      service.disconnected(server);
      try {
        server.close(1000, 'closed');
      } catch {
        // closed already
      }
    });
    server.addEventListener('error', () => service.disconnected(server));
    return new Response(null, { status: 101, webSocket: client });
  };
}
