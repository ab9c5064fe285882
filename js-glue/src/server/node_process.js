// What a layer node (`serve`) and the gateway share as Node processes: a service without a token
// answers anyone who reaches it, so it starts on a loopback address only unless told otherwise in
// so many words; the HTTP app on @hono/node-server, listening at once, with the requests in flight
// counted until their answers are out; and the drain on shutdown.
import { createAdaptorServer } from '@hono/node-server';

import { checkAuthToken } from './app.js';

/**
 * Whether `host` is a loopback address (127.0.0.0/8, ::1, localhost): reachable from this
 * machine only.
 * @example isLoopback('127.0.0.1') // true; isLoopback('0.0.0.0') // false
 */
export function isLoopback(host) {
  const h = String(host).toLowerCase().replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '::1' || /^(::ffff:)?127(\.\d{1,3}){3}$/.test(h);
}

// How loud a request's log line is: a failure of the service is an ERROR; a client that went
// away or was too slow is worth a WARNING; every deliberate answer (4xx, 429, 503 while loading
// or shutting down) is INFO.
export function requestSeverity(status) {
  if (status === 500) return 'ERROR';
  if (status === 499 || status === 408) return 'WARNING';
  return 'INFO';
}

/** Listens on host:port -> the port bound (port 0: one the system chose). */
export function listen(server, port, host) {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve(server.address().port);
    });
  });
}

/**
 * Throws unless the service may start: a well-formed token, or a loopback host, or
 * insecureNoAuth. `what` names it in the message ('' for a layer node, ' the gateway'), `user`
 * what an open one would give away ('the node', 'the model').
 */
export function checkOpenAccess({ authToken, host, insecureNoAuth }, what, user) {
  checkAuthToken(authToken);
  if (authToken === undefined && !isLoopback(host) && !insecureNoAuth) {
    throw new Error(`refusing to serve${what} without AUTH_TOKEN on ${host}, which is not a loopback address: anyone who reaches it could use ${user}. ` +
      'Set AUTH_TOKEN, bind --host 127.0.0.1, or pass --insecure-no-auth (LAYERFOLD_INSECURE_NO_AUTH=1) to serve it open anyway');
  }
}

/** The WARNING an open service off loopback logs at start (checkOpenAccess let it through). */
export function warnIfOpen({ authToken, host, port }, log) {
  if (authToken === undefined && !isLoopback(host)) {
    log('WARNING', 'NO AUTHENTICATION: /v1/* and /metrics are open to anyone who reaches this address (--insecure-no-auth)', { host, port });
  }
}

/**
 * `app` served on host:port, Node's server timeouts set from `timeouts` ({headersTimeout,
 * requestTimeout, timeout}), each request counted from its arrival until its response closes.
 * `drain(whenIdle, deadlineMs)` stops accepting, waits until no request is in flight and
 * `whenIdle()` settles, or the deadline passes, then cuts what is left and resolves with the
 * number of requests that were still in flight.
 * @example const http = await startHttpServer(app, { port: 8080, host: '127.0.0.1', timeouts: { timeout: 0 }, log });
 */
export async function startHttpServer(app, { port, host, timeouts, log }) {
  const server = createAdaptorServer({ fetch: app.fetch });
  Object.assign(server, timeouts);
  let inFlight = 0;
  let onIdle = () => {};
  server.on('request', (request, response) => {
    inFlight++;
    response.once('close', () => {
      if (--inFlight === 0) onIdle();
    });
  });
  const boundPort = await listen(server, port, host);
  log('INFO', 'listening', { host, port: boundPort });

  async function drain(whenIdle, deadlineMs) {
    server.close();
    server.closeIdleConnections();
    const httpIdle = inFlight === 0 ? Promise.resolve() : new Promise((resolve) => { onIdle = resolve; });
    let timer;
    const deadline = new Promise((resolve) => { timer = setTimeout(resolve, deadlineMs); });
    await Promise.race([Promise.all([httpIdle, whenIdle()]), deadline]);
    clearTimeout(timer);
    const abandoned = inFlight;
    server.closeAllConnections();
    return abandoned;
  }

  return {
    server,
    port: boundPort,
    url: `http://${host.includes(':') ? `[${host}]` : host}:${boundPort}`,
    inFlight: () => inFlight,
    drain,
  };
}
