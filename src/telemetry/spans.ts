import {
  type HrTime,
  isSpanContextValid,
  ROOT_CONTEXT,
  type SpanContext,
  SpanKind,
  type SpanStatus,
  SpanStatusCode,
  trace,
} from "@opentelemetry/api";
import {
  addHrTimes,
  hrTimeDuration,
  type InstrumentationScope,
  millisToHrTime,
  parseTraceParent,
  TraceState,
} from "@opentelemetry/core";
import type { Resource } from "@opentelemetry/resources";
import {
  RandomIdGenerator,
  type ReadableSpan,
  type Sampler,
  SamplingDecision,
  type SpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import type { Attributes, ClientSpanInit, RequestSpanInit, Span, TraceParent } from "./api.js";
import { ATTR } from "./conventions.js";
import type { DurationHistogram, MetricValues } from "./durations.js";

/**
 * Spans made here, not by the SDK's tracer: sampling is decided first, so a span that is not
 * sampled is a few fields (its ids, its duration for the metric) and never reaches the SDK; a
 * sampled one is a `ReadableSpan` handed to the SDK's span processor at its end, which batches
 * it and exports it through the SDK's OTLP exporter. The rules are the SDK tracer's: the
 * configured sampler (one of the SDK's own) decides a root or a span under the client's context;
 * a span under one of ours follows it, so a trace is whole or absent; invalid client contexts are
 * ignored. One rule is ours: a write is always sampled.
 */

type Values = Record<string, string | number | boolean>;

/** What sampled spans share: where they go at their end and what they say of the service. */
export interface SpanSink {
  processor: SpanProcessor;
  resource: Resource;
  scope: InstrumentationScope;
}

const ids = new RandomIdGenerator();
const NO_LINKS: ReadableSpan["links"] = [];
const NO_EVENTS: ReadableSpan["events"] = [];
const UNSET: SpanStatus = { code: SpanStatusCode.UNSET };
const NO_ATTRIBUTES: Attributes = {};

/** performance.timeOrigin as an HrTime: constant, so made once. */
const TIME_ORIGIN = millisToHrTime(performance.timeOrigin);

/** A performance.now() reading as the SDK's `hrTime(now)` gives it. */
function hrTimeOf(now: number): HrTime {
  return addHrTimes(TIME_ORIGIN, millisToHrTime(now));
}

/** Keeps the defined values of `from`. */
function copyDefined(into: Values, from: Attributes): void {
  for (const name in from) {
    const value = from[name];
    if (value !== undefined) into[name] = value;
  }
}

/** A sampled span's own attributes: the defined ones given at its start. */
function copyOf(attributes: Attributes): Values {
  const copy: Values = {};
  copyDefined(copy, attributes);
  return copy;
}

/** The client's context as the W3C propagator reads it; undefined if absent or invalid. */
function remoteParent(parent: TraceParent | undefined): SpanContext | undefined {
  if (parent?.traceparent === undefined) return undefined;
  const context = parseTraceParent(parent.traceparent);
  if (context === null || !isSpanContextValid(context)) return undefined;
  context.isRemote = true;
  if (parent.tracestate !== undefined) context.traceState = new TraceState(parent.tracestate);
  return context;
}

/**
 * A span's metric: the metric's attributes as they are set, and the time from its start to its
 * first `end`. Every span of ours is one.
 */
abstract class MeteredSpan implements Span {
  /** The metric's values, kept until the end, then let go (a sampled span lives on in the queue). */
  #metricValues: MetricValues | undefined;
  #ended = false;
  protected readonly startedAt = performance.now();

  constructor(
    /** The histogram of its duration, if any. */
    private readonly metric: DurationHistogram | undefined,
    attributes: Attributes,
    /** `mcp.method.name` when `attributes` does not carry it. */
    method?: string,
  ) {
    if (metric === undefined) return;
    this.#metricValues = metric.valuesOf(attributes);
    if (method !== undefined) metric.keepOne(this.#metricValues, ATTR.methodName, method);
  }

  abstract readonly traceparent: string | undefined;
  abstract readonly ids: { traceId: string; spanId: string; sampled: boolean } | undefined;
  /** What the span itself keeps of attributes set before its end. */
  protected setOwn(_attributes: Attributes): void {}
  /** What the span itself does at its (first) end, at `now` (performance.now()). */
  protected endOwn(_now: number): void {}

  set(attributes: Attributes): void {
    if (this.#ended) return;
    if (this.#metricValues !== undefined) this.metric?.keep(this.#metricValues, attributes);
    this.setOwn(attributes);
  }

  fail(errorType: string): void {
    this.set({ [ATTR.errorType]: errorType });
  }

  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    const now = performance.now();
    this.endOwn(now);
    if (this.#metricValues !== undefined) {
      this.metric?.record((now - this.startedAt) / 1000, this.#metricValues);
      this.#metricValues = undefined;
    }
  }
}

/**
 * A span whose trace is not sampled: nothing is kept but its metric. It still has a context
 * (`traceparent` with the sampled flag off), so the log lines and StoreLink name its trace; a
 * span under it is one of these too, with the same context and no ids of its own.
 */
class UnsampledSpan extends MeteredSpan {
  #spanId: string | undefined;

  constructor(
    readonly traceId: string,
    metric: DurationHistogram | undefined,
    attributes: Attributes,
    method: string | undefined,
    /** The unsampled span this one is under, whose context it carries. */
    readonly under: UnsampledSpan | undefined,
  ) {
    super(metric, attributes, method);
  }

  /** Made when first asked for. */
  #ownSpanId(): string {
    this.#spanId ??= ids.generateSpanId();
    return this.#spanId;
  }

  get traceparent(): string {
    return this.under?.traceparent ?? `00-${this.traceId}-${this.#ownSpanId()}-00`;
  }

  get ids(): { traceId: string; spanId: string; sampled: boolean } | undefined {
    if (this.under !== undefined) return undefined;
    return { traceId: this.traceId, spanId: this.#ownSpanId(), sampled: false };
  }
}

/**
 * A sampled span: kept whole, and handed to the span processor at its end. It is the
 * `ReadableSpan` the exporter reads; what every span says alike (no links, no events, an unset
 * status) is on the prototype, so a span waiting in the export queue is small.
 */
class SampledSpan extends MeteredSpan implements ReadableSpan {
  readonly #context: SpanContext;
  readonly startTime: HrTime;
  #endTime: HrTime | undefined;
  declare readonly status: SpanStatus;
  declare readonly links: ReadableSpan["links"];
  declare readonly events: ReadableSpan["events"];
  declare readonly droppedAttributesCount: number;
  declare readonly droppedEventsCount: number;
  declare readonly droppedLinksCount: number;

  constructor(
    private readonly sink: SpanSink,
    readonly name: string,
    readonly kind: SpanKind,
    traceId: string,
    readonly parentSpanContext: SpanContext | undefined,
    readonly attributes: Values,
    metric: DurationHistogram | undefined,
  ) {
    super(metric, attributes);
    this.#context = {
      traceId,
      spanId: ids.generateSpanId(),
      traceFlags: 1,
      traceState: parentSpanContext?.traceState,
    };
    this.startTime = hrTimeOf(this.startedAt);
  }

  spanContext(): SpanContext {
    return this.#context;
  }

  get resource(): Resource {
    return this.sink.resource;
  }

  get instrumentationScope(): InstrumentationScope {
    return this.sink.scope;
  }

  get endTime(): HrTime {
    return this.#endTime ?? [0, 0];
  }

  get ended(): boolean {
    return this.#endTime !== undefined;
  }

  get duration(): HrTime {
    return this.#endTime === undefined ? [0, 0] : hrTimeDuration(this.startTime, this.#endTime);
  }

  get traceparent(): string {
    return `00-${this.#context.traceId}-${this.#context.spanId}-01`;
  }

  get ids(): { traceId: string; spanId: string; sampled: boolean } {
    return { traceId: this.#context.traceId, spanId: this.#context.spanId, sampled: true };
  }

  protected override setOwn(attributes: Attributes): void {
    copyDefined(this.attributes, attributes);
  }

  protected override endOwn(now: number): void {
    this.#endTime = hrTimeOf(now);
    this.sink.processor.onEnd(this);
  }
}
Object.defineProperties(SampledSpan.prototype, {
  status: { value: UNSET },
  links: { value: NO_LINKS },
  events: { value: NO_EVENTS },
  droppedAttributesCount: { value: 0 },
  droppedEventsCount: { value: 0 },
  droppedLinksCount: { value: 0 },
});

/** Makes the spans of one service: `request` for a SERVER span, `client` under one of ours. */
export class SpanFactory {
  constructor(
    private readonly sink: SpanSink,
    /** Decides reads (and a client span with no span of ours above it). */
    private readonly sampler: Sampler,
  ) {}

  request(init: RequestSpanInit, metric: DurationHistogram | undefined): Span {
    const name = init.target === undefined ? init.method : `${init.method} ${init.target}`;
    const parent = remoteParent(init.parent);
    const traceId = parent?.traceId ?? ids.generateTraceId();
    const given = init.attributes ?? NO_ATTRIBUTES;
    if (init.write !== true && !this.#sampled(parent, traceId, name, SpanKind.SERVER, given)) {
      return new UnsampledSpan(traceId, metric, given, init.method, undefined);
    }
    const attributes = copyOf(given);
    attributes[ATTR.methodName] = init.method;
    if (init.write === true) attributes[ATTR.write] = true;
    return new SampledSpan(this.sink, name, SpanKind.SERVER, traceId, parent, attributes, metric);
  }

  client(parent: Span, init: ClientSpanInit, metric: DurationHistogram | undefined): Span {
    const given = init.attributes ?? NO_ATTRIBUTES;
    if (parent instanceof UnsampledSpan) {
      return new UnsampledSpan(parent.traceId, metric, given, undefined, parent.under ?? parent);
    }
    let traceId: string;
    let context: SpanContext | undefined;
    if (parent instanceof SampledSpan) {
      context = parent.spanContext();
      traceId = context.traceId;
    } else {
      // No span of ours above it: a root, sampled as a read is.
      traceId = ids.generateTraceId();
      if (!this.#sampled(undefined, traceId, init.name, SpanKind.CLIENT, given)) {
        return new UnsampledSpan(traceId, metric, given, undefined, undefined);
      }
    }
    return new SampledSpan(
      this.sink,
      init.name,
      SpanKind.CLIENT,
      traceId,
      context,
      copyOf(given),
      metric,
    );
  }

  /** The configured sampler's verdict on a span under `parent` (the client's) or a root. */
  #sampled(
    parent: SpanContext | undefined,
    traceId: string,
    name: string,
    kind: SpanKind,
    attributes: Attributes,
  ): boolean {
    const context =
      parent === undefined ? ROOT_CONTEXT : trace.setSpanContext(ROOT_CONTEXT, parent);
    return (
      this.sampler.shouldSample(context, traceId, name, kind, attributes, NO_LINKS).decision ===
      SamplingDecision.RECORD_AND_SAMPLED
    );
  }
}
