// The gateway's telemetry: Prometheus metrics, OpenTelemetry tracing, structured logs.
export * from './metrics.js';
export * from './tracing.js';
export * from './logger.js';
