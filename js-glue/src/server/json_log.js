// Structured logs of a layer-node process: one JSON object per line on stdout, the shape Cloud
// Logging parses (severity, message, then fields). Secrets never reach a line: configuration is
// redacted before it is logged.

const SECRET_KEY = /auth.?token|bearer|secret|password|access.?key|credential/i;

/**
 * A URL fit for a log: no user:password and no query string (a presigned URL carries its
 * signature there).
 * @example redactUrl('https://u:p@host/m.gguf?X-Amz-Signature=abc') // 'https://host/m.gguf?[redacted]'
 */
export function redactUrl(text) {
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(text)) return text;
  try {
    const url = new URL(text);
    const query = url.search ? '?[redacted]' : '';
    url.username = '';
    url.password = '';
    url.search = '';
    return `${url}${query}`;
  } catch {
    return '[unparsable URL]';
  }
}

/**
 * A copy of a configuration with every secret-looking field replaced by "[redacted]" (or
 * "[unset]") and URLs stripped of credentials.
 * @example redactConfig({ authToken: 'x', model: 'r2://m/a.gguf' }) // { authToken: '[redacted]', model: 'r2://m/a.gguf' }
 */
export function redactConfig(config) {
  return Object.fromEntries(Object.entries(config).map(([key, value]) => {
    if (SECRET_KEY.test(key)) return [key, value ? '[redacted]' : '[unset]'];
    if (typeof value === 'string') return [key, redactUrl(value)];
    return [key, value];
  }));
}

/**
 * log(severity, message, fields) writing one JSON line per call.
 * @example const log = jsonLog(); log('INFO', 'ready', { loadSeconds: 3.2 });
 */
export function jsonLog(write = (line) => process.stdout.write(line)) {
  return (severity, message, fields = {}) => {
    write(`${JSON.stringify({ time: new Date().toISOString(), severity, message, ...fields })}\n`);
  };
}
