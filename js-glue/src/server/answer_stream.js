// Answers sent as streams pulled by the client's reading: the next chunk is made (or handed
// over) only when the connection has taken the previous one, so a client that reads slowly holds
// the node to one chunk in flight rather than to a whole answer, and a client that stops reading
// for sendTimeoutMs is cut off (onStall closes its connection, or without one the body fails)
// instead of pinning the answer forever. end(outcome) tells the app when the answer is over, so the request's place in the
// line (work_queue.js) is held exactly as long as its memory is.

// Bytes handed to the connection per pull for an answer already in memory: views, not copies.
const CHUNK_BYTES = 256 * 1024;

/**
 * A Response whose body is pulled from next() (async () => Uint8Array, or null at the end).
 * end(outcome, error) is called once: 'done' (read to the end), 'cancelled' (the client went
 * away), 'stalled' (nothing read for sendTimeoutMs: onStall(), where the host can close the
 * connection, else the body fails) or 'failed' (next() threw: the body is cut short, which the client sees against
 * its Content-Length).
 * @example return streamedResponse({ next: async () => chunks.shift() ?? null, headers, sendTimeoutMs: 30_000, end: () => ticket.release() });
 */
export function streamedResponse({ next, headers, status = 200, sendTimeoutMs, end = () => {}, onStall = null }) {
  let timer = null;
  let over = false;
  const finish = (outcome, error) => {
    clearTimeout(timer);
    if (over) return;
    over = true;
    end(outcome, error);
  };
  const body = new ReadableStream({
    async pull(controller) {
      clearTimeout(timer);
      let chunk;
      try {
        chunk = await next();
      } catch (error) {
        controller.error(error);
        finish('failed', error);
        return;
      }
      if (over) return;
      if (chunk === null) {
        controller.close();
        finish('done');
        return;
      }
      controller.enqueue(chunk);
      // Armed until the connection asks for more: a client that stopped reading.
      timer = setTimeout(() => {
        const error = new Error(`the client read nothing for ${sendTimeoutMs} ms`);
        finish('stalled', error);
        // A closed connection cancels the body; failing it as well would only have the HTTP
        // adapter print the error, stack and all, beside the JSON log.
        if (onStall) onStall();
        else controller.error(error);
      }, sendTimeoutMs);
      timer?.unref?.();  // a deadline does not keep a process alive by itself
    },
    cancel(reason) {
      finish('cancelled', reason);
    },
  }, { highWaterMark: 0 });
  return new Response(body, { status, headers });
}

/**
 * streamedResponse over bytes already in memory (a Uint8Array or a typed array's bytes), with
 * their Content-Length.
 * @example return bytesResponse(new Uint8Array(out.buffer), { 'content-type': 'application/octet-stream' }, { sendTimeoutMs, end });
 */
export function bytesResponse(bytes, headers, options) {
  const view = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let at = 0;
  return streamedResponse({
    ...options,
    headers: { ...headers, 'content-length': String(view.byteLength) },
    next: async () => {
      if (at >= view.byteLength) return null;
      const chunk = view.subarray(at, at + CHUNK_BYTES);
      at += chunk.byteLength;
      return chunk;
    },
  });
}
