// Log lines for a person at a terminal: time, severity, message, then the fields as key=value,
// on one line. A process whose log is a terminal writes these; anything else (a pipe, a file,
// Cloud Run's collector) gets JSON lines (json_log.js). Redacted as the JSON lines are.
import { jsonLog } from './json_log.js';
import { redactDeep } from './redact.js';

// A field's value as one token: plain text when it has no space, quote or '=', else JSON.
function valueText(value) {
  if (typeof value === 'string' && value !== '' && !/[\s"=]/.test(value)) return value;
  return JSON.stringify(value) ?? String(value);
}

/**
 * A log line for a terminal.
 * @example readableLine('2026-01-02T03:04:05.678Z', 'INFO', 'listening', { host: '127.0.0.1', port: 8080 }) // '2026-01-02T03:04:05.678Z INFO listening host=127.0.0.1 port=8080\n'
 */
export function readableLine(time, severity, message, fields) {
  const pairs = Object.entries(fields).filter(([, value]) => value !== undefined).map(([key, value]) => ` ${key}=${valueText(value)}`);
  return `${time} ${severity.padEnd(7)} ${message}${pairs.join('')}\n`;
}

/**
 * log(severity, message, fields) to `stream` (stdout by default): readable lines when it is a
 * terminal, JSON lines otherwise.
 * @example const log = processLog(); log('INFO', 'ready', { loadSeconds: 3.2 });
 */
export function processLog(stream = process.stdout) {
  const write = (line) => stream.write(line);
  if (!stream.isTTY) return jsonLog(write);
  return (severity, message, fields = {}) => write(readableLine(new Date().toISOString(), severity, redactDeep(message), redactDeep(fields)));
}
