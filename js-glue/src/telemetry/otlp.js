// Export of the spans over OTLP/HTTP (JSON), in Node, when configured the standard way:
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the full URL) or OTEL_EXPORTER_OTLP_ENDPOINT (a base URL
// that /v1/traces is added to), with OTEL_EXPORTER_OTLP_HEADERS and OTEL_SERVICE_NAME as the
// exporter and SDK read them. Only then is the SDK loaded and registered as the API's tracer
// provider; otherwise the API stays a no-op and nothing is exported.
import { trace } from '@opentelemetry/api';

/**
 * Registers the SDK with a batching OTLP exporter when `env` configures one -> {shutdown()},
 * which exports what is left (call it before the process exits), or null when not configured.
 * @example const telemetry = await startOtlpExport(process.env, 'layerfold-node'); ... await telemetry?.shutdown();
 */
export async function startOtlpExport(env, serviceName) {
  if (!env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT && !env.OTEL_EXPORTER_OTLP_ENDPOINT) return null;
  const [{ BatchSpanProcessor, TracerProvider }, { OTLPTraceExporter }, { resourceFromAttributes }] = await Promise.all([
    import('@opentelemetry/sdk-trace'), import('@opentelemetry/exporter-trace-otlp-http'), import('@opentelemetry/resources'),
  ]);
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ 'service.name': env.OTEL_SERVICE_NAME || serviceName }),
    spanProcessors: [new BatchSpanProcessor({ exporter: new OTLPTraceExporter() })],
  });
  trace.setGlobalTracerProvider(provider);
  return {
    async shutdown() {
      await provider.shutdown();
      trace.disable();
    },
  };
}
