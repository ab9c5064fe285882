// W3C Trace Context (https://www.w3.org/TR/trace-context/): the `traceparent` header that carries
// a request's trace id from the gateway to every node it calls. A valid header is continued; an
// absent or malformed one starts a new trace, as the standard asks of a receiver (a bad header is
// not the request's fault, so it is never refused for it).

export const TRACEPARENT = 'traceparent';

// version-traceid-parentid-flags, lowercase hex; a later version may append fields after a dash.
const HEADER = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ZEROS = /^0+$/;

function randomHex(bytes) {
  const values = crypto.getRandomValues(new Uint8Array(bytes));
  const hex = Array.from(values, (b) => b.toString(16).padStart(2, '0')).join('');
  // All zeros is the standard's "invalid" id: one chance in 2^64 at worst, but never sent.
  return ZEROS.test(hex) ? randomHex(bytes) : hex;
}

/** A new 8-byte span id as 16 hex digits. */
export function newSpanId() {
  return randomHex(8);
}

/**
 * The header's fields, or null when it is absent or not valid: version ff, an all-zero id, a
 * version 00 header with anything after the flags, or anything but lowercase hex.
 * @example parseTraceparent('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01') // { traceId: '4bf9…', parentId: '00f0…', flags: '01' }
 */
export function parseTraceparent(raw) {
  const m = typeof raw === 'string' ? HEADER.exec(raw.trim()) : null;
  if (!m) return null;
  const [, version, traceId, parentId, flags, rest] = m;
  if (version === 'ff' || (version === '00' && rest !== undefined)) return null;
  if (ZEROS.test(traceId) || ZEROS.test(parentId)) return null;
  return { traceId, parentId, flags };
}

/**
 * A request's trace from its incoming header: the caller's trace continued (its trace id and
 * flags) or, without a valid header, a new sampled one; spanId is the request's own span, the
 * parent of the calls it makes.
 * @example const trace = requestTrace(c.req.header('traceparent')); // { traceId, spanId, flags, parentId }
 */
export function requestTrace(raw) {
  const incoming = parseTraceparent(raw);
  if (incoming) return { traceId: incoming.traceId, spanId: newSpanId(), flags: incoming.flags, parentId: incoming.parentId };
  return { traceId: randomHex(16), spanId: newSpanId(), flags: '01', parentId: null };
}

/**
 * The header a call made within `trace` sends: the trace id and flags, the caller's span as parent.
 * @example formatTraceparent({ traceId: '4bf9…', spanId: '00f0…', flags: '01' }) // '00-4bf9…-00f0…-01'
 */
export function formatTraceparent({ traceId, spanId, flags }) {
  return `00-${traceId}-${spanId}-${flags}`;
}
