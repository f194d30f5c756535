/**
 * Telemetry as the rest of the server sees it: spans with explicit parents and the metrics they
 * feed, behind one small interface. This module imports nothing of OpenTelemetry: with telemetry
 * off (no OTEL_EXPORTER_OTLP_ENDPOINT) the server runs on NO_TELEMETRY and no OpenTelemetry
 * module is ever loaded (telemetry/load.ts imports telemetry/otel.ts only when asked).
 *
 * Attribute names are the ones conventions.ts pins. Values never carry a tool's arguments, a
 * reason, a store key or a token.
 */

export type AttributeValue = string | number | boolean;
export type Attributes = Readonly<Record<string, AttributeValue | undefined>>;

/** W3C trace context as a client sends it: `params._meta` (preferred) or the HTTP headers. */
export interface TraceParent {
  traceparent?: string | undefined;
  tracestate?: string | undefined;
}

/** One span. Every method is a no-op on a span that is not recorded. */
export interface Span {
  /** Sets attributes; an undefined value is left out. */
  set(attributes: Attributes): void;
  /** The operation failed: `error.type` (a tool error's type, a StoreLink kind, an HTTP status). */
  fail(errorType: string): void;
  /** Ends the span once (later calls do nothing); its duration feeds its metric. */
  end(): void;
  /** This span's context for a downstream request (`traceparent`), when there is one to send. */
  readonly traceparent: string | undefined;
  /** Its trace and span ids, for the structured log lines of the call. */
  readonly ids: { traceId: string; spanId: string; sampled: boolean } | undefined;
}

export interface RequestSpanInit {
  /** `mcp.method.name`, e.g. `tools/call`. */
  method: string;
  /** The span name's target: the tool's name for tools/call. */
  target?: string | undefined;
  /** The client's trace context: `params._meta` first, else the HTTP request's headers. */
  parent?: TraceParent | undefined;
  /** A write is always recorded, whatever the sampler says of reads. */
  write?: boolean;
  attributes?: Attributes;
}

export interface ClientSpanInit {
  /** The span's name, e.g. `GET /v1/stores/{store_id}/stock/{sku}` or `EVALSHA take`. */
  name: string;
  /** Which dependency: StoreLink (its duration metric) or the limits store. */
  system: "storelink" | "limits";
  attributes?: Attributes;
}

export interface Telemetry {
  readonly enabled: boolean;
  /** The SERVER span of one MCP request. */
  request(init: RequestSpanInit): Span;
  /** A CLIENT span under `parent` (a call to StoreLink or to the limits store). */
  client(parent: Span, init: ClientSpanInit): Span;
  /** The limits store's availability, as its health changes (a gauge: 1 up, 0 down). */
  limitsAvailable(up: boolean): void;
  /** Exports what is buffered within `ms`; never rejects, never waits longer. */
  shutdown(ms: number): Promise<void>;
}

/** A span that records nothing. */
export const NO_SPAN: Span = {
  set() {},
  fail() {},
  end() {},
  traceparent: undefined,
  ids: undefined,
};

/** Telemetry off: every call returns at once, nothing is kept. */
export const NO_TELEMETRY: Telemetry = {
  enabled: false,
  request: () => NO_SPAN,
  client: () => NO_SPAN,
  limitsAvailable() {},
  shutdown: () => Promise.resolve(),
};

/** The trace context in a request's `params._meta` (the MCP conventions' carrier), if any. */
export function traceParentOf(meta: unknown): TraceParent | undefined {
  if (meta === null || typeof meta !== "object") return undefined;
  const { traceparent, tracestate } = meta as Record<string, unknown>;
  if (typeof traceparent !== "string") return undefined;
  return { traceparent, tracestate: typeof tracestate === "string" ? tracestate : undefined };
}

function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** The trace context of an HTTP request's headers, if any. */
export function traceParentOfHeaders(
  headers: Record<string, string | string[] | undefined>,
): TraceParent | undefined {
  const traceparent = first(headers.traceparent);
  if (traceparent === undefined) return undefined;
  return { traceparent, tracestate: first(headers.tracestate) };
}
