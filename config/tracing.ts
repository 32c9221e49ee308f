/**
 * Whether a process exports traces: an OTLP endpoint is set (OpenTelemetry's own variables, declared
 * in config/schema.ts) and OTEL_SDK_DISABLED is not `true`. Imports nothing, so the module the
 * Procfile preloads costs nothing when tracing is off (docs/operations.md "Tracing").
 */
export function tracingRequested(env: Readonly<Record<string, string | undefined>>): boolean {
  if (env.OTEL_SDK_DISABLED === 'true') return false
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
}
