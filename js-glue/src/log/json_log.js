// Structured logs of a layer-node process: one JSON object per line on stdout, the shape Cloud
// Logging parses (severity, message, then fields). Secrets never reach a line: every string of
// every line goes through redact.js on its way out, whoever wrote the message (an object
// source's error quoting a presigned URL, a configuration).
import { redactDeep } from './redact.js';

export { redactConfig, redactUrl } from './redact.js';

/**
 * log(severity, message, fields) writing one JSON line per call, redacted.
 * @example const log = jsonLog(); log('INFO', 'ready', { loadSeconds: 3.2 });
 */
export function jsonLog(write = (line) => process.stdout.write(line)) {
  return (severity, message, fields = {}) => {
    write(`${JSON.stringify({ time: new Date().toISOString(), severity, message: redactDeep(message), ...redactDeep(fields) })}\n`);
  };
}
