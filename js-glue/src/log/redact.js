// Secrets out of everything a layer node writes: its log lines, its HTTP answers (/v1/info's
// model, error messages) and the CLI's messages. A model URL is where they hide: user:password@,
// a presigned query string (X-Amz-Signature, X-Amz-Credential, a token), and the same key=value
// pairs or a bearer token quoted in an error message. One helper, applied where text leaves the
// process, because the messages come from everywhere (object sources, the engine, fetch).

const URL_IN_TEXT = /\b[a-z][a-z0-9+.-]*:\/\/[^\s"'<>`]+/gi;
// key=value or key: value pairs whose key names a secret, outside a URL too (the URL's query is
// dropped whole before this runs).
const SECRET_PAIR = /\b((?:x-amz-)?(?:signature|credential|security-token)|sig|token|access[_-]?token|auth[_-]?token|password|secret|api[_-]?key|access[_-]?key(?:[_-]?id)?|secret[_-]?access[_-]?key)(\s*[=:]\s*)("[^"]*"|[^\s&"',;]+)/gi;
// As an Authorization header would carry it (capitalized, so prose about "a bearer token" stays).
const BEARER = /\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]+/g;

/**
 * A URL fit for a log or an answer: no user:password@ and no query string (a presigned URL
 * carries its signature there), the fragment with it; the rest exactly as written (not
 * normalized). Text that is not a URL is returned as is.
 * @example redactUrl('https://u:p@host/m.gguf?X-Amz-Signature=abc') // 'https://host/m.gguf?[redacted]'
 */
export function redactUrl(text) {
  const m = typeof text === 'string' ? /^([a-z][a-z0-9+.-]*:\/\/)(?:[^/?#]*@)?([^?#]*)([?#].*)?$/is.exec(text) : null;
  if (!m) return text;
  return `${m[1]}${m[2]}${m[3] === undefined ? '' : m[3][0] === '?' ? '?[redacted]' : '#[redacted]'}`;
}

/**
 * Text with every URL in it redacted (redactUrl) and every secret-looking key=value pair or
 * bearer token replaced by [redacted]: what may reach a log line, an HTTP answer or stderr.
 * @example redactSecrets('load failed: https://u:p@h/m.gguf?sig=1: HTTP 403') // 'load failed: https://h/m.gguf?[redacted] HTTP 403'
 */
export function redactSecrets(text) {
  if (typeof text !== 'string') return text;
  return text
    .replace(URL_IN_TEXT, (url) => redactUrl(url))
    .replace(SECRET_PAIR, (_, key, separator) => `${key}${separator}[redacted]`)
    .replace(BEARER, (_, scheme) => `${scheme} [redacted]`);
}

const SECRET_KEY = /auth.?token|bearer|secret|password|access.?key|credential/i;

/**
 * A copy of a configuration with every secret-looking field replaced by "[redacted]" (or
 * "[unset]") and the other strings redacted (redactSecrets).
 * @example redactConfig({ authToken: 'x', model: 'r2://m/a.gguf' }) // { authToken: '[redacted]', model: 'r2://m/a.gguf' }
 */
export function redactConfig(config) {
  return Object.fromEntries(Object.entries(config).map(([key, value]) => {
    if (SECRET_KEY.test(key)) return [key, value ? '[redacted]' : '[unset]'];
    return [key, redactDeep(value)];
  }));
}

/**
 * A copy of a JSON-like value with every string in it redacted (redactSecrets).
 * @example redactDeep({ error: 'GET https://h/m?sig=1 failed' }) // { error: 'GET https://h/m?[redacted] failed' }
 */
export function redactDeep(value) {
  if (typeof value === 'string') return redactSecrets(value);
  if (Array.isArray(value)) return value.map(redactDeep);
  if (value !== null && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, redactDeep(v)]));
  }
  return value;
}
