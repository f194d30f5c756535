import { once } from "node:events";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { currentScope } from "./spawn.js";

/**
 * A small OTLP/HTTP receiver on 127.0.0.1:0, standing in for the Collector (no Collector binary
 * installs here): `POST /v1/traces` and `/v1/metrics`, in `application/json` or
 * `application/x-protobuf` (decoded by the wire reader below, for the fields the tests read).
 * It is ended with the test (or the file, from a `beforeAll`) that started it, like a process.
 */

export type ReceiverMode =
  /** Answers 200 and keeps what it got. */
  | "ok"
  /** Answers 500 (not retryable in OTLP) and keeps nothing. */
  | "fail500"
  /** Never answers: the exporter's own timeout has to end the request. */
  | "slow";

export type Value = string | number | boolean;

/** OTLP's span kinds. */
export const KIND = { INTERNAL: 1, SERVER: 2, CLIENT: 3 } as const;

export interface ReceivedSpan {
  name: string;
  kind: number;
  traceId: string;
  spanId: string;
  /** "" for a root span. */
  parentSpanId: string;
  attributes: Record<string, Value>;
  resource: Record<string, Value>;
  /** The instrumentation scope's name and version. */
  scope: { name: string; version: string };
  /** The W3C tracestate it carries ("" for none). */
  traceState: string;
  /** Start and end, microseconds since the epoch (a number: the spans are JSON-printable). */
  startUs: number;
  endUs: number;
  /** How it arrived. */
  format: "json" | "protobuf";
}

export interface ReceivedPoint {
  metric: string;
  unit: string;
  attributes: Record<string, Value>;
  /** A gauge's or a sum's value. */
  value?: number;
  /** A histogram point's count and sum. */
  count?: number;
  sum?: number;
  format: "json" | "protobuf";
}

export interface OtlpReceiver {
  /** The base endpoint, http://127.0.0.1:<port> (OTEL_EXPORTER_OTLP_ENDPOINT). */
  url: string;
  mode: ReceiverMode;
  spans: ReceivedSpan[];
  points: ReceivedPoint[];
  /** Every request it got, answered or not: `POST /v1/traces application/x-protobuf`. */
  requests: string[];
  close(): Promise<void>;
}

export async function startOtlpReceiver(mode: ReceiverMode = "ok"): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const points: ReceivedPoint[] = [];
  const requests: string[] = [];
  const held = new Set<ServerResponse>();
  const receiver: OtlpReceiver = {
    url: "",
    mode,
    spans,
    points,
    requests,
    close: async () => {},
  };
  const server = createServer((req, res) => {
    void handle(req, res);
  });
  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const type = (req.headers["content-type"] ?? "").split(";")[0]?.trim() ?? "";
    requests.push(`${req.method} ${req.url} ${type}`);
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    if (receiver.mode === "slow") {
      held.add(res);
      res.on("close", () => held.delete(res));
      return;
    }
    if (receiver.mode === "fail500") {
      res.writeHead(500).end();
      return;
    }
    const json = type === "application/json";
    if (req.method !== "POST" || (!json && type !== "application/x-protobuf")) {
      res.writeHead(415).end();
      return;
    }
    try {
      if (req.url === "/v1/traces") {
        spans.push(...(json ? spansFromJson(body) : spansFromProtobuf(body)));
      } else if (req.url === "/v1/metrics") {
        points.push(...(json ? pointsFromJson(body) : pointsFromProtobuf(body)));
      } else {
        res.writeHead(404).end();
        return;
      }
    } catch {
      res.writeHead(400).end();
      return;
    }
    // An empty Export*ServiceResponse: full success.
    if (json) res.writeHead(200, { "content-type": "application/json" }).end("{}");
    else res.writeHead(200, { "content-type": "application/x-protobuf" }).end();
  }
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const scope = currentScope();
  const owned = {
    end: async () => {
      scope.delete(owned);
      for (const res of held) res.destroy();
      server.closeAllConnections();
      if (server.listening) await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  scope.add(owned);
  receiver.close = owned.end;
  return receiver;
}

// --- OTLP/JSON -------------------------------------------------------------------------------

interface JsonAnyValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: number | string;
  doubleValue?: number;
}
type JsonKeyValue = { key: string; value?: JsonAnyValue };

function jsonValue(value: JsonAnyValue | undefined): Value | undefined {
  if (value === undefined) return undefined;
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.boolValue !== undefined) return value.boolValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  return undefined;
}

function jsonAttributes(list: JsonKeyValue[] | undefined): Record<string, Value> {
  const out: Record<string, Value> = {};
  for (const { key, value } of list ?? []) {
    const v = jsonValue(value);
    if (v !== undefined) out[key] = v;
  }
  return out;
}

function spansFromJson(body: Buffer): ReceivedSpan[] {
  const request = JSON.parse(body.toString("utf8")) as {
    resourceSpans?: {
      resource?: { attributes?: JsonKeyValue[] };
      scopeSpans?: {
        scope?: { name?: string; version?: string };
        spans?: {
          name: string;
          kind: number;
          traceId: string;
          spanId: string;
          parentSpanId?: string;
          traceState?: string;
          startTimeUnixNano: string | number;
          endTimeUnixNano: string | number;
          attributes?: JsonKeyValue[];
        }[];
      }[];
    }[];
  };
  return (request.resourceSpans ?? []).flatMap((rs) =>
    (rs.scopeSpans ?? []).flatMap((ss) =>
      (ss.spans ?? []).map((s) => ({
        name: s.name,
        kind: s.kind,
        traceId: s.traceId,
        spanId: s.spanId,
        parentSpanId: s.parentSpanId ?? "",
        attributes: jsonAttributes(s.attributes),
        resource: jsonAttributes(rs.resource?.attributes),
        scope: { name: ss.scope?.name ?? "", version: ss.scope?.version ?? "" },
        traceState: s.traceState ?? "",
        startUs: Number(BigInt(s.startTimeUnixNano) / 1000n),
        endUs: Number(BigInt(s.endTimeUnixNano) / 1000n),
        format: "json" as const,
      })),
    ),
  );
}

interface JsonPoint {
  attributes?: JsonKeyValue[];
  asDouble?: number;
  asInt?: number | string;
  count?: number | string;
  sum?: number;
}

function pointsFromJson(body: Buffer): ReceivedPoint[] {
  const request = JSON.parse(body.toString("utf8")) as {
    resourceMetrics?: {
      scopeMetrics?: {
        metrics?: {
          name: string;
          unit?: string;
          gauge?: { dataPoints?: JsonPoint[] };
          sum?: { dataPoints?: JsonPoint[] };
          histogram?: { dataPoints?: JsonPoint[] };
        }[];
      }[];
    }[];
  };
  return (request.resourceMetrics ?? []).flatMap((rm) =>
    (rm.scopeMetrics ?? []).flatMap((sm) =>
      (sm.metrics ?? []).flatMap((m) => {
        const base = { metric: m.name, unit: m.unit ?? "", format: "json" as const };
        const numbers = [...(m.gauge?.dataPoints ?? []), ...(m.sum?.dataPoints ?? [])].map((p) => ({
          ...base,
          attributes: jsonAttributes(p.attributes),
          value: p.asDouble ?? Number(p.asInt),
        }));
        const histogram = (m.histogram?.dataPoints ?? []).map((p) => ({
          ...base,
          attributes: jsonAttributes(p.attributes),
          count: Number(p.count ?? 0),
          sum: p.sum ?? 0,
        }));
        return [...numbers, ...histogram];
      }),
    ),
  );
}

// --- OTLP/protobuf: a protobuf wire reader and the fields of the OTLP messages read here ------

type Field = { wire: 0; n: bigint } | { wire: 1 | 5; raw: Buffer } | { wire: 2; raw: Buffer };

/** A message's fields by number, in order (repeated fields several times). */
function fields(buffer: Buffer): Map<number, Field[]> {
  const out = new Map<number, Field[]>();
  let at = 0;
  const varint = (): bigint => {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      const byte = buffer[at++];
      if (byte === undefined) throw new Error("truncated varint");
      result |= BigInt(byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return result;
      shift += 7n;
    }
  };
  while (at < buffer.length) {
    const tag = Number(varint());
    const number = tag >>> 3;
    const wire = tag & 7;
    let field: Field;
    if (wire === 0) field = { wire, n: varint() };
    else if (wire === 1 || wire === 5) {
      const size = wire === 1 ? 8 : 4;
      field = { wire, raw: buffer.subarray(at, at + size) };
      at += size;
    } else if (wire === 2) {
      const size = Number(varint());
      field = { wire, raw: buffer.subarray(at, at + size) };
      at += size;
    } else throw new Error(`unsupported wire type ${wire}`);
    const list = out.get(number) ?? [];
    list.push(field);
    out.set(number, list);
  }
  return out;
}

const bytesOf = (f: Map<number, Field[]>, n: number): Buffer[] =>
  (f.get(n) ?? []).flatMap((x) => (x.wire === 2 ? [x.raw] : []));
const messages = (f: Map<number, Field[]>, n: number) => bytesOf(f, n).map(fields);
const text = (f: Map<number, Field[]>, n: number): string =>
  bytesOf(f, n)[0]?.toString("utf8") ?? "";
const hex = (f: Map<number, Field[]>, n: number): string => bytesOf(f, n)[0]?.toString("hex") ?? "";
const varintOf = (f: Map<number, Field[]>, n: number): bigint | undefined => {
  const x = f.get(n)?.[0];
  return x?.wire === 0 ? x.n : undefined;
};
const fixedOf = (f: Map<number, Field[]>, n: number): Buffer | undefined => {
  const x = f.get(n)?.[0];
  return x?.wire === 1 ? x.raw : undefined;
};

/** KeyValue { 1 key; 2 AnyValue { 1 string, 2 bool, 3 int, 4 double } }. */
function protoAttributes(list: Map<number, Field[]>[]): Record<string, Value> {
  const out: Record<string, Value> = {};
  for (const kv of list) {
    const value = messages(kv, 2)[0];
    if (value === undefined) continue;
    const key = text(kv, 1);
    if (value.has(1)) out[key] = text(value, 1);
    else if (value.has(2)) out[key] = varintOf(value, 2) === 1n;
    else if (value.has(3)) out[key] = Number(BigInt.asIntN(64, varintOf(value, 3) ?? 0n));
    else if (value.has(4)) out[key] = fixedOf(value, 4)?.readDoubleLE(0) ?? Number.NaN;
  }
  return out;
}

/**
 * ExportTraceServiceRequest { 1 ResourceSpans { 1 Resource { 1 attrs }, 2 ScopeSpans
 * { 1 InstrumentationScope { 1 name, 2 version }, 2 Span } } }.
 */
function spansFromProtobuf(body: Buffer): ReceivedSpan[] {
  return messages(fields(body), 1).flatMap((rs) => {
    const resource = protoAttributes(messages(messages(rs, 1)[0] ?? new Map(), 1));
    return messages(rs, 2).flatMap((ss) => {
      const scope = messages(ss, 1)[0] ?? new Map();
      // Span { 1 trace_id, 2 span_id, 3 trace_state, 4 parent_span_id, 5 name, 6 kind,
      // 7 start_time_unix_nano, 8 end_time_unix_nano, 9 attributes }
      return messages(ss, 2).map((s) => ({
        name: text(s, 5),
        kind: Number(varintOf(s, 6) ?? 0n),
        traceId: hex(s, 1),
        spanId: hex(s, 2),
        parentSpanId: hex(s, 4),
        attributes: protoAttributes(messages(s, 9)),
        resource,
        scope: { name: text(scope, 1), version: text(scope, 2) },
        traceState: text(s, 3),
        startUs: Number((fixedOf(s, 7)?.readBigUInt64LE(0) ?? 0n) / 1000n),
        endUs: Number((fixedOf(s, 8)?.readBigUInt64LE(0) ?? 0n) / 1000n),
        format: "protobuf" as const,
      }));
    });
  });
}

/**
 * ExportMetricsServiceRequest { 1 ResourceMetrics { 2 ScopeMetrics { 2 Metric { 1 name, 3 unit,
 * 5 Gauge, 7 Sum, 9 Histogram } } } }; Gauge and Sum { 1 NumberDataPoint { 4 as_double,
 * 6 as_int, 7 attributes } }; Histogram { 1 HistogramDataPoint { 4 count, 5 sum, 9 attributes } }.
 */
function pointsFromProtobuf(body: Buffer): ReceivedPoint[] {
  return messages(fields(body), 1).flatMap((rm) =>
    messages(rm, 2).flatMap((sm) =>
      messages(sm, 2).flatMap((m) => {
        const base = { metric: text(m, 1), unit: text(m, 3), format: "protobuf" as const };
        const numbers = [...messages(m, 5), ...messages(m, 7)].flatMap((g) =>
          messages(g, 1).map((p) => {
            const double = fixedOf(p, 4);
            const int = fixedOf(p, 6);
            return {
              ...base,
              attributes: protoAttributes(messages(p, 7)),
              value: double ? double.readDoubleLE(0) : Number(int?.readBigInt64LE(0) ?? 0n),
            };
          }),
        );
        const histogram = messages(m, 9).flatMap((h) =>
          messages(h, 1).map((p) => ({
            ...base,
            attributes: protoAttributes(messages(p, 9)),
            count: Number(fixedOf(p, 4)?.readBigUInt64LE(0) ?? 0n),
            sum: fixedOf(p, 5)?.readDoubleLE(0) ?? 0,
          })),
        );
        return [...numbers, ...histogram];
      }),
    ),
  );
}
