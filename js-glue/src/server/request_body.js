// A request's body, read only once the request has been admitted (work_queue.js) and only under
// a deadline and a size limit: a node holds the bodies of at most its admitted requests, none of
// them for longer than the deadline, none beyond the limit. A client that goes away mid-upload
// is an abort (client_closed), not a failure of the node.
import { HttpError } from './http_error.js';

// The rest of the body is not read: the connection cannot carry another request.
const CLOSE = { connection: 'close' };

/**
 * 413 too_large when the request's Content-Length is above maxBytes: checked before the request
 * is admitted, so a refused upload costs nothing.
 * @example checkDeclaredLength(c.req.raw, 1 << 20, () => 'body above 1 MiB');
 */
export function checkDeclaredLength(request, maxBytes, describeLimit) {
  const declared = request.headers.get('content-length');
  if (declared !== null && /^\d+$/.test(declared) && Number(declared) > maxBytes) {
    throw new HttpError('too_large', `body of ${declared} bytes (Content-Length): ${describeLimit()}`, { headers: CLOSE });
  }
}

/**
 * The whole body as an ArrayBuffer, read within timeoutMs: 408 body_timeout when it is not in
 * by then, 413 too_large as soon as more than maxBytes arrived (a chunked body has no declared
 * length), client_closed when the client went away. Reads from the web-standard stream, so the
 * Node host and the edge worker share it.
 * @example const bytes = await readBody(c.req.raw, { maxBytes: 1 << 20, timeoutMs: 30_000, describeLimit: () => 'at most 1 MiB' });
 */
export async function readBody(request, { maxBytes, timeoutMs, describeLimit }) {
  if (request.body === null) return new ArrayBuffer(0);
  const declared = Number(request.headers.get('content-length') ?? NaN);
  // With a declared length the body goes straight into one buffer of that size, allocated when
  // its first byte arrives; without, the chunks are joined at the end.
  const sized = Number.isSafeInteger(declared) && declared <= maxBytes;
  const reader = request.body.getReader();
  let timer;
  const deadline = new Promise((resolve) => {
    timer = setTimeout(() => resolve(null), timeoutMs);
    timer?.unref?.();  // a deadline does not keep a process alive by itself
  });
  let received = 0;
  let whole = null;
  const chunks = [];
  try {
    for (;;) {
      let step;
      try {
        step = await Promise.race([reader.read(), deadline]);
      } catch (error) {
        throw new HttpError('client_closed', `the client went away after ${received} bytes of the body (${error.code ?? error.message})`);
      }
      if (step === null) {
        throw new HttpError('body_timeout', `the body was not received within ${timeoutMs} ms (${received} bytes${sized ? ` of ${declared}` : ''} arrived): send it faster, or in smaller requests`,
          { headers: CLOSE });
      }
      if (step.done) break;
      const chunk = step.value;
      if (received + chunk.byteLength > maxBytes) {
        throw new HttpError('too_large', `body above ${maxBytes} bytes while reading it: ${describeLimit()}`, { headers: CLOSE });
      }
      if (sized) {
        if (received + chunk.byteLength > declared) throw new HttpError('bad_length', `body longer than its Content-Length ${declared}`, { headers: CLOSE });
        whole ??= new Uint8Array(declared);
        whole.set(chunk, received);
      } else {
        chunks.push(chunk);
      }
      received += chunk.byteLength;
    }
  } finally {
    clearTimeout(timer);
    // A read still pending after the deadline is given up on, not cancelled: cancelling would
    // reset the connection before the 408 is written.
    reader.releaseLock();
  }
  if (sized) {
    if (whole === null) return new ArrayBuffer(0);
    return received === whole.length ? whole.buffer : whole.buffer.slice(0, received);
  }
  const out = new Uint8Array(received);
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.byteLength;
  }
  return out.buffer;
}
