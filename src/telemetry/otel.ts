import { type ExportResult, ExportResultCode } from "@opentelemetry/core";
import { OTLPMetricExporter as JsonMetricExporter } from "@opentelemetry/exporter-metrics-otlp-http";
import { OTLPMetricExporter as ProtoMetricExporter } from "@opentelemetry/exporter-metrics-otlp-proto";
import { OTLPTraceExporter as JsonTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { OTLPTraceExporter as ProtoTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { defaultResource, resourceFromAttributes } from "@opentelemetry/resources";
import {
  MeterProvider,
  type MetricProducer,
  PeriodicExportingMetricReader,
  type PushMetricExporter,
} from "@opentelemetry/sdk-metrics";
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  type Sampler,
  type SpanExporter,
  TraceIdRatioBasedSampler,
} from "@opentelemetry/sdk-trace-base";
import { opsLog } from "../logging/ops.js";
import type { ClientSpanInit, RequestSpanInit, Span, Telemetry } from "./api.js";
import {
  DURATION_BUCKETS,
  METRICS,
  SERVER_METRIC_ATTRIBUTES,
  STORELINK_METRIC_ATTRIBUTES,
} from "./conventions.js";
import { DurationHistogram } from "./durations.js";
import type { SamplerName, TelemetrySettings } from "./settings.js";
import { SpanFactory } from "./spans.js";

/**
 * Telemetry on: OpenTelemetry's SDK with explicit parents only. Nothing is registered globally
 * (no tracer provider, no context manager, no instrumentation): a span's parent is the trace
 * context the client sent, or the Span object the caller hands back. telemetry/spans.ts makes
 * the spans; the SDK's samplers decide, its span processor batches, its exporters send. Export is
 * batched, bounded and off the request path: a collector that is down, slow or failing costs a
 * dropped batch and one ops line per kind of failure, never an error or a wait for the caller.
 */

const SCOPE = "korral-storelink-mcp";
/** The span queue: beyond it spans are dropped, never held. */
const MAX_QUEUE = 2048;
const MAX_BATCH = 512;

/** The sampler OTEL_TRACES_SAMPLER names (the SDK's own, built from settings, not from env). */
function namedSampler(name: SamplerName, ratio: number): Sampler {
  switch (name) {
    case "always_on":
      return new AlwaysOnSampler();
    case "always_off":
      return new AlwaysOffSampler();
    case "traceidratio":
      return new TraceIdRatioBasedSampler(ratio);
    case "parentbased_always_on":
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case "parentbased_always_off":
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case "parentbased_traceidratio":
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio) });
  }
}

/** A short, secret-free name of why an export failed: an HTTP status, a socket error code. */
function failureKind(error: Error | undefined): string {
  if (error === undefined) return "unknown";
  const code = (error as { code?: unknown }).code;
  if (typeof code === "number") return `http_${code}`;
  if (typeof code === "string" && /^[A-Z_]{2,40}$/.test(code)) return code;
  return error.message.slice(0, 80) || error.name;
}

/** Logs an export failure once per signal and kind: a dead collector is one line, not a flood. */
function failureReporter(signal: "traces" | "metrics"): (result: ExportResult) => void {
  const seen = new Set<string>();
  return (result) => {
    if (result.code === ExportResultCode.SUCCESS) return;
    const kind = failureKind(result.error);
    if (seen.has(kind)) return;
    seen.add(kind);
    opsLog.warn(
      { telemetry: signal, kind },
      "telemetry export failed; data was dropped (this kind of failure is logged once)",
    );
  };
}

function reportingSpanExporter(inner: SpanExporter): SpanExporter {
  const report = failureReporter("traces");
  return {
    export: (spans, done) =>
      inner.export(spans, (result) => {
        report(result);
        done(result);
      }),
    shutdown: () => inner.shutdown(),
    forceFlush: () => inner.forceFlush?.() ?? Promise.resolve(),
  };
}

function reportingMetricExporter(inner: PushMetricExporter): PushMetricExporter {
  const report = failureReporter("metrics");
  return {
    export: (metrics, done) =>
      inner.export(metrics, (result) => {
        report(result);
        done(result);
      }),
    forceFlush: () => inner.forceFlush(),
    shutdown: () => inner.shutdown(),
    selectAggregationTemporality: inner.selectAggregationTemporality?.bind(inner),
    selectAggregation: inner.selectAggregation?.bind(inner),
  };
}

/** Telemetry per `settings`: spans and metrics exported over OTLP/HTTP. */
export function createTelemetry(settings: TelemetrySettings): Telemetry {
  const resource = defaultResource().merge(
    resourceFromAttributes({
      "service.name": settings.serviceName,
      ...(settings.serviceVersion === undefined
        ? {}
        : { "service.version": settings.serviceVersion }),
    }),
  );
  const exporterOptions = (url: string) => ({ url, timeoutMillis: settings.exportTimeoutMs });
  const json = settings.protocol === "http/json";
  const spanExporter = reportingSpanExporter(
    json
      ? new JsonTraceExporter(exporterOptions(settings.tracesUrl))
      : new ProtoTraceExporter(exporterOptions(settings.tracesUrl)),
  );
  const processor = new BatchSpanProcessor(spanExporter, {
    maxQueueSize: MAX_QUEUE,
    maxExportBatchSize: MAX_BATCH,
    exportTimeoutMillis: settings.exportTimeoutMs,
  });
  const spans = new SpanFactory(
    { processor, resource, scope: { name: SCOPE, version: settings.serviceVersion } },
    namedSampler(settings.sampler, settings.samplerRatio),
  );

  // The duration histograms are ours (telemetry/durations.ts), handed to the reader at each
  // collection; only the limits gauge is the SDK's own instrument.
  const metricsUrl = settings.metricsUrl;
  const serverDuration =
    metricsUrl === undefined
      ? undefined
      : new DurationHistogram(
          METRICS.serverOperationDuration,
          "Duration of one MCP request, as the server handled it",
          DURATION_BUCKETS,
          SERVER_METRIC_ATTRIBUTES,
        );
  const storelinkDuration =
    metricsUrl === undefined
      ? undefined
      : new DurationHistogram(
          METRICS.storelinkRequestDuration,
          "Duration of one StoreLink request, by route and outcome",
          DURATION_BUCKETS,
          STORELINK_METRIC_ATTRIBUTES,
        );
  const durations: MetricProducer = {
    collect: async () => {
      const metrics = [serverDuration?.collect(), storelinkDuration?.collect()].filter(
        (metric) => metric !== undefined,
      );
      const scope = { name: SCOPE, version: settings.serviceVersion };
      return {
        resourceMetrics: { resource, scopeMetrics: metrics.length > 0 ? [{ scope, metrics }] : [] },
        errors: [],
      };
    },
  };
  const meterProvider =
    metricsUrl === undefined
      ? undefined
      : new MeterProvider({
          resource,
          readers: [
            new PeriodicExportingMetricReader({
              exporter: reportingMetricExporter(
                json
                  ? new JsonMetricExporter(exporterOptions(metricsUrl))
                  : new ProtoMetricExporter(exporterOptions(metricsUrl)),
              ),
              exportIntervalMillis: settings.metricIntervalMs,
              exportTimeoutMillis: Math.min(settings.exportTimeoutMs, settings.metricIntervalMs),
              metricProducers: [durations],
            }),
          ],
        });
  const meter = meterProvider?.getMeter(SCOPE, settings.serviceVersion);
  let limitsUp: number | undefined;
  meter
    ?.createObservableGauge(METRICS.limitsAvailable, {
      description: "1 while the limits store answers, 0 while it is down",
    })
    .addCallback((result) => {
      if (limitsUp !== undefined) result.observe(limitsUp);
    });

  let stopped: Promise<void> | undefined;
  return {
    enabled: true,
    request(init: RequestSpanInit): Span {
      return spans.request(init, serverDuration);
    },
    client(parent: Span, init: ClientSpanInit): Span {
      // The limits store's CLIENT spans have no duration metric (its availability is a gauge).
      return spans.client(
        parent,
        init,
        init.system === "storelink" ? storelinkDuration : undefined,
      );
    },
    limitsAvailable(up: boolean): void {
      limitsUp = up ? 1 : 0;
    },
    shutdown(ms: number): Promise<void> {
      // Flushes what is buffered and stops the exporters, once; waits `ms` at most, never rejects.
      stopped ??= Promise.allSettled([
        processor.shutdown(),
        meterProvider?.shutdown({ timeoutMillis: ms }),
      ]).then(() => undefined);
      let timer: NodeJS.Timeout | undefined;
      const bound = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, ms);
        timer.unref();
      });
      return Promise.race([stopped, bound]).finally(() => clearTimeout(timer));
    },
  };
}
