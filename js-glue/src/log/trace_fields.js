// A request's trace id in its log lines, where the log reader looks for it: on Google Cloud
// (GOOGLE_CLOUD_PROJECT set, as on Cloud Run) the field Cloud Logging turns into the entry's
// trace, linking the line to the trace and to the other services' lines of the same request;
// elsewhere a plain trace_id.

/**
 * The log fields naming `trace` (requestTrace's), or none without one.
 * @example traceFields({ traceId: 'ab…', spanId: 'cd…' }, { GOOGLE_CLOUD_PROJECT: 'p' }) // { 'logging.googleapis.com/trace': 'projects/p/traces/ab…', 'logging.googleapis.com/spanId': 'cd…' }
 */
export function traceFields(trace, env = globalThis.process?.env ?? {}) {
  if (!trace) return {};
  const project = env.GOOGLE_CLOUD_PROJECT;
  if (!project) return { trace_id: trace.traceId, span_id: trace.spanId };
  return { 'logging.googleapis.com/trace': `projects/${project}/traces/${trace.traceId}`, 'logging.googleapis.com/spanId': trace.spanId };
}
