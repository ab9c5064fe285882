// Server-sent events as OpenAI sends them: one `data: {json}` event per chunk, a blank line
// after each, and `data: [DONE]` at the end. An error after the stream began travels as an
// event of its own ({"error": {...}}), which the official clients raise as an APIError.
const utf8 = new TextEncoder();

/** One SSE event carrying `value` (an object as JSON, or the literal [DONE]). */
export function sseEvent(value) {
  return utf8.encode(`data: ${typeof value === 'string' ? value : JSON.stringify(value)}\n\n`);
}

export const SSE_HEADERS = { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' };
