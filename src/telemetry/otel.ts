import {
  type Context,
  defaultTextMapGetter,
  type Attributes as OtelAttributes,
  type Span as OtelSpan,
  ROOT_CONTEXT,
  SpanKind,
  trace,
} from "@opentelemetry/api";
import {
  type ExportResult,
  ExportResultCode,
  W3CTraceContextPropagator,
} from "@opentelemetry/core";
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
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  type Sampler,
  SamplingDecision,
  type SamplingResult,
  type SpanExporter,
  TraceIdRatioBasedSampler,
} from "@opentelemetry/sdk-trace-base";
import { opsLog } from "../logging/ops.js";
import type {
  Attributes,
  ClientSpanInit,
  RequestSpanInit,
  Span,
  Telemetry,
  TraceParent,
} from "./api.js";
import {
  ATTR,
  DURATION_BUCKETS,
  METRICS,
  SERVER_METRIC_ATTRIBUTES,
  STORELINK_METRIC_ATTRIBUTES,
} from "./conventions.js";
import { DurationHistogram } from "./durations.js";
import type { SamplerName, TelemetrySettings } from "./settings.js";

/**
 * Telemetry on: OpenTelemetry's SDK with explicit parents only. Nothing is registered globally
 * (no tracer provider, no context manager, no instrumentation): a span's parent is the trace
 * context the client sent, or the Span object the caller hands back. Export is batched, bounded
 * and off the request path: a collector that is down, slow or failing costs a dropped batch and
 * one ops line per kind of failure, never an error or a wait for the caller.
 */

const SCOPE = "korral-storelink-mcp";
/** The span queue: beyond it spans are dropped, never held. */
const MAX_QUEUE = 2048;
const MAX_BATCH = 512;

const propagator = new W3CTraceContextPropagator();

/** The client's context (invalid values are ignored: the span is then a root). */
function parentContext(parent: TraceParent | undefined): Context {
  if (parent?.traceparent === undefined) return ROOT_CONTEXT;
  const carrier: Record<string, string> = { traceparent: parent.traceparent };
  if (parent.tracestate !== undefined) carrier.tracestate = parent.tracestate;
  return propagator.extract(ROOT_CONTEXT, carrier, defaultTextMapGetter);
}

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

const SAMPLED: SamplingResult = { decision: SamplingDecision.RECORD_AND_SAMPLED };
const DROPPED: SamplingResult = { decision: SamplingDecision.NOT_RECORD };

/**
 * The configured sampler decides reads only: a span under one of ours follows its parent (one
 * trace is whole or absent), and a request marked `korral.write` at its start is always sampled.
 */
class WritesAlwaysSampler implements Sampler {
  constructor(private readonly reads: Sampler) {}

  shouldSample(
    context: Context,
    traceId: string,
    name: string,
    kind: SpanKind,
    attributes: OtelAttributes,
    links: Parameters<Sampler["shouldSample"]>[5],
  ): SamplingResult {
    const parent = trace.getSpanContext(context);
    if (parent !== undefined && parent.isRemote !== true) {
      return (parent.traceFlags & 1) === 1 ? SAMPLED : DROPPED;
    }
    if (attributes[ATTR.write] === true) return SAMPLED;
    return this.reads.shouldSample(context, traceId, name, kind, attributes, links);
  }

  toString(): string {
    return `WritesAlways{${this.reads.toString()}}`;
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

/** Keeps the attributes a duration metric reads from its span's attributes. */
function pick(
  into: Record<string, string | number | boolean>,
  names: readonly string[],
  from: Attributes,
) {
  for (const name of names) {
    const value = from[name];
    if (value !== undefined) into[name] = value;
  }
}

/** Copies the defined attributes (the SDK would keep an explicit undefined as a key). */
function defined(attributes: Attributes | undefined): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  if (attributes === undefined) return out;
  for (const name in attributes) {
    const value = attributes[name];
    if (value !== undefined) out[name] = value;
  }
  return out;
}

/**
 * What every span of ours keeps for its duration metric: the metric's attributes as they are set,
 * and the time from its start to its first `end`.
 */
abstract class MeteredSpan implements Span {
  readonly #metricAttributes: Record<string, string | number | boolean> = {};
  #ended = false;
  readonly #start = performance.now();

  constructor(
    private readonly metric: DurationHistogram | undefined,
    private readonly metricNames: readonly string[],
    attributes: Attributes | undefined,
  ) {
    if (metric !== undefined && attributes !== undefined) {
      pick(this.#metricAttributes, metricNames, attributes);
    }
  }

  abstract readonly traceparent: string | undefined;
  abstract readonly ids: { traceId: string; spanId: string; sampled: boolean } | undefined;
  /** What the span itself does with attributes set before its end. */
  protected abstract setOwn(attributes: Attributes): void;
  /** What the span itself does at its (first) end. */
  protected abstract endOwn(): void;

  set(attributes: Attributes): void {
    if (this.#ended) return;
    if (this.metric !== undefined) pick(this.#metricAttributes, this.metricNames, attributes);
    this.setOwn(attributes);
  }

  fail(errorType: string): void {
    this.set({ [ATTR.errorType]: errorType });
  }

  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.endOwn();
    this.metric?.record((performance.now() - this.#start) / 1000, this.#metricAttributes);
  }
}

/**
 * A CLIENT span under a parent that is not recorded: its trace is not sampled, so no span is
 * made (the SDK's would be dropped too, by WritesAlwaysSampler's "follow the parent"); only its
 * duration feeds its metric. Downstream gets the parent's own context, unsampled, so StoreLink's
 * spans still name this trace.
 */
class UnrecordedSpan extends MeteredSpan {
  readonly ids = undefined;

  constructor(
    readonly traceparent: string | undefined,
    metric: DurationHistogram | undefined,
    metricNames: readonly string[],
    attributes: Attributes | undefined,
  ) {
    super(metric, metricNames, attributes);
  }

  protected setOwn(): void {}
  protected endOwn(): void {}
}

/** Our Span over OpenTelemetry's: keeps the SDK span (a client span's parent) and its metric. */
class OtelBackedSpan extends MeteredSpan {
  constructor(
    readonly inner: OtelSpan,
    metric: DurationHistogram | undefined,
    metricNames: readonly string[],
    attributes: Attributes | undefined,
  ) {
    super(metric, metricNames, attributes);
  }

  protected setOwn(attributes: Attributes): void {
    if (this.inner.isRecording()) this.inner.setAttributes(defined(attributes));
  }

  protected endOwn(): void {
    this.inner.end();
  }

  #traceparent: string | undefined;
  #ids: { traceId: string; spanId: string; sampled: boolean } | undefined;

  // A span's context never changes: each is built once, when first asked for.
  get traceparent(): string {
    if (this.#traceparent === undefined) {
      const c = this.inner.spanContext();
      this.#traceparent = `00-${c.traceId}-${c.spanId}-0${c.traceFlags & 1}`;
    }
    return this.#traceparent;
  }

  get ids(): { traceId: string; spanId: string; sampled: boolean } {
    if (this.#ids === undefined) {
      const c = this.inner.spanContext();
      this.#ids = { traceId: c.traceId, spanId: c.spanId, sampled: (c.traceFlags & 1) === 1 };
    }
    return this.#ids;
  }
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
  const tracerProvider = new BasicTracerProvider({
    resource,
    sampler: new WritesAlwaysSampler(namedSampler(settings.sampler, settings.samplerRatio)),
    spanProcessors: [
      new BatchSpanProcessor(spanExporter, {
        maxQueueSize: MAX_QUEUE,
        maxExportBatchSize: MAX_BATCH,
        exportTimeoutMillis: settings.exportTimeoutMs,
      }),
    ],
  });
  const tracer = tracerProvider.getTracer(SCOPE, settings.serviceVersion);

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
      const attributes = defined(init.attributes);
      attributes[ATTR.methodName] = init.method;
      if (init.write === true) attributes[ATTR.write] = true;
      const name = init.target === undefined ? init.method : `${init.method} ${init.target}`;
      const inner = tracer.startSpan(
        name,
        { kind: SpanKind.SERVER, attributes },
        parentContext(init.parent),
      );
      return new OtelBackedSpan(inner, serverDuration, SERVER_METRIC_ATTRIBUTES, attributes);
    },
    client(parent: Span, init: ClientSpanInit): Span {
      const metric = init.system === "storelink" ? storelinkDuration : undefined;
      const metricNames = init.system === "storelink" ? STORELINK_METRIC_ATTRIBUTES : [];
      if (parent instanceof OtelBackedSpan && !parent.inner.isRecording()) {
        return new UnrecordedSpan(parent.traceparent, metric, metricNames, init.attributes);
      }
      const context =
        parent instanceof OtelBackedSpan ? trace.setSpan(ROOT_CONTEXT, parent.inner) : ROOT_CONTEXT;
      const attributes = defined(init.attributes);
      const inner = tracer.startSpan(init.name, { kind: SpanKind.CLIENT, attributes }, context);
      return new OtelBackedSpan(inner, metric, metricNames, attributes);
    },
    limitsAvailable(up: boolean): void {
      limitsUp = up ? 1 : 0;
    },
    shutdown(ms: number): Promise<void> {
      // Flushes what is buffered and stops the exporters, once; waits `ms` at most, never rejects.
      stopped ??= Promise.allSettled([
        tracerProvider.shutdown(),
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
