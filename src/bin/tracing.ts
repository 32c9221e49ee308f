import { tracingRequested } from '../../config/tracing.ts'

// Preloaded by the Procfile and the npm start scripts (`node --import ./src/bin/tracing.ts …`),
// before the entry point imports express or pg: instrumentation must be in place first. Tracing off
// (no OTLP endpoint): this loads nothing else and the process starts exactly as without it.
if (tracingRequested(process.env)) {
  const { startTracing } = await import('../runtime/tracing.ts')
  await startTracing(process.env)
}
