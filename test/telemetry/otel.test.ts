import { describe, expect, it } from "vitest";
import { NO_SPAN, type Telemetry } from "../../src/telemetry/api.js";
import {
  ATTR,
  METRICS,
  OPERATION_EXECUTE_TOOL,
  TRANSPORT,
} from "../../src/telemetry/conventions.js";
import { createTelemetry } from "../../src/telemetry/otel.js";
import { readTelemetrySettings } from "../../src/telemetry/settings.js";
import { captureOpsLog } from "../helpers/ops-log.js";
import { KIND, type OtlpReceiver, startOtlpReceiver } from "../helpers/otlp-receiver.js";
import { freePort } from "../helpers/spawn.js";

/**
 * createTelemetry in-process against a real OTLP/HTTP receiver on loopback: what it exports, with
 * which parents, sampled how, and that a collector that fails never reaches the caller.
 */

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_ID = "00f067aa0ba902b7";
const TRACEPARENT = `00-${TRACE_ID}-${PARENT_ID}-01`;
/** Long enough that no periodic export happens during a test: shutdown() flushes. */
const INTERVAL = "600000";

function telemetryFor(url: string, env: Record<string, string> = {}): Telemetry {
  const settings = readTelemetrySettings(
    { OTEL_EXPORTER_OTLP_ENDPOINT: url, OTEL_METRIC_EXPORT_INTERVAL: INTERVAL, ...env },
    "9.9.9",
  );
  if (settings === undefined) throw new Error("telemetry should be on");
  return createTelemetry(settings);
}

/** One tools/call with a StoreLink request under it, as the call path makes them. */
function oneToolCall(telemetry: Telemetry, write = false, fail?: string) {
  const span = telemetry.request({
    method: "tools/call",
    target: "get_stock",
    parent: { traceparent: TRACEPARENT, tracestate: "vendor=x" },
    write,
    attributes: {
      [ATTR.toolName]: "get_stock",
      [ATTR.operationName]: OPERATION_EXECUTE_TOOL,
      [ATTR.jsonrpcId]: "7",
      [ATTR.protocolVersion]: "2025-06-18",
      [ATTR.transport]: TRANSPORT.http,
      [ATTR.requestId]: "req-1",
      [ATTR.idempotencyKey]: undefined,
    },
  });
  const client = telemetry.client(span, {
    name: "GET /v1/stores/{store_id}/stock/{sku}",
    system: "storelink",
    attributes: {
      [ATTR.httpMethod]: "GET",
      [ATTR.urlTemplate]: "/v1/stores/{store_id}/stock/{sku}",
      [ATTR.serverAddress]: "127.0.0.1",
      [ATTR.serverPort]: 1,
    },
  });
  client.set({ [ATTR.httpStatus]: 200 });
  client.end();
  span.set({ [ATTR.storeId]: "s1", [ATTR.auditOutcome]: "ok" });
  if (fail !== undefined) span.fail(fail);
  span.end();
  return { span, client };
}

/** A tools/call with no client context, and a StoreLink request under it. */
function oneToolCallRoot(telemetry: Telemetry) {
  const span = telemetry.request({ method: "tools/call", target: "get_stock" });
  const client = telemetry.client(span, { name: "GET /v1/skus", system: "storelink" });
  client.end();
  span.end();
  return { span, client };
}

describe.each(["http/protobuf", "http/json"])("exported over %s", (protocol) => {
  it("a request span under the client's parent, its client span as its child, and the metrics", async () => {
    const receiver = await startOtlpReceiver();
    const telemetry = telemetryFor(receiver.url, { OTEL_EXPORTER_OTLP_PROTOCOL: protocol });
    // The SDK's clock is the monotonic one from the process's time origin: it may drift from
    // Date.now() by a little, never by a second.
    const before = (Date.now() - 1000) * 1000;
    const { span, client } = oneToolCall(telemetry, false, "tool_error");
    const after = (Date.now() + 1000) * 1000;
    // Set after its end: changes nothing.
    span.set({ [ATTR.idempotencyKey]: "late" });
    telemetry.limitsAvailable(false);
    expect(span.traceparent).toMatch(new RegExp(`^00-${TRACE_ID}-[0-9a-f]{16}-01$`));
    expect(span.ids).toMatchObject({ traceId: TRACE_ID, sampled: true });
    await telemetry.shutdown(5000);

    const format = protocol === "http/json" ? "json" : "protobuf";
    expect(receiver.spans.every((s) => s.format === format)).toBe(true);
    const server = receiver.spans.find((s) => s.kind === KIND.SERVER);
    expect(server).toMatchObject({
      name: "tools/call get_stock",
      traceId: TRACE_ID,
      parentSpanId: PARENT_ID,
      spanId: span.ids?.spanId,
      attributes: {
        [ATTR.methodName]: "tools/call",
        [ATTR.toolName]: "get_stock",
        [ATTR.operationName]: "execute_tool",
        [ATTR.jsonrpcId]: "7",
        [ATTR.protocolVersion]: "2025-06-18",
        [ATTR.transport]: "tcp",
        [ATTR.errorType]: "tool_error",
        [ATTR.requestId]: "req-1",
        [ATTR.storeId]: "s1",
        [ATTR.auditOutcome]: "ok",
      },
      resource: { "service.name": "korral-storelink-mcp", "service.version": "9.9.9" },
    });
    expect(server?.attributes).not.toHaveProperty(ATTR.idempotencyKey);
    expect(receiver.spans.find((s) => s.kind === KIND.CLIENT)).toMatchObject({
      name: "GET /v1/stores/{store_id}/stock/{sku}",
      traceId: TRACE_ID,
      parentSpanId: span.ids?.spanId,
      spanId: client.ids?.spanId,
      attributes: { [ATTR.httpStatus]: 200 },
    });
    // Both carry the client's tracestate, the service's scope, and their own times.
    for (const exported of receiver.spans) {
      expect(exported).toMatchObject({
        traceState: "vendor=x",
        scope: { name: "korral-storelink-mcp", version: "9.9.9" },
      });
      expect(exported.startUs).toBeGreaterThanOrEqual(before);
      expect(exported.endUs).toBeGreaterThanOrEqual(exported.startUs);
      expect(exported.endUs).toBeLessThanOrEqual(after);
    }
    const [serverSpan, clientSpan] = [KIND.SERVER, KIND.CLIENT].map((kind) =>
      receiver.spans.find((s) => s.kind === kind),
    );
    // The client span runs inside its server span.
    expect(clientSpan?.startUs).toBeGreaterThanOrEqual(serverSpan?.startUs ?? 0);
    expect(clientSpan?.endUs).toBeLessThanOrEqual(serverSpan?.endUs ?? 0);
    expect(client.traceparent).toBe(`00-${TRACE_ID}-${client.ids?.spanId}-01`);

    expect(receiver.requests).toContain(
      `POST /v1/metrics application/${protocol === "http/json" ? "json" : "x-protobuf"}`,
    );
    const duration = receiver.points.find((p) => p.metric === METRICS.serverOperationDuration);
    expect(duration).toMatchObject({
      unit: "s",
      count: 1,
      attributes: {
        [ATTR.methodName]: "tools/call",
        [ATTR.toolName]: "get_stock",
        [ATTR.errorType]: "tool_error",
        [ATTR.protocolVersion]: "2025-06-18",
        [ATTR.transport]: "tcp",
      },
    });
    // No ids in a metric: its attributes are the bounded set only.
    expect(Object.keys(duration?.attributes ?? {}).sort()).toEqual(
      [ATTR.methodName, ATTR.toolName, ATTR.errorType, ATTR.protocolVersion, ATTR.transport].sort(),
    );
    expect(
      receiver.points.find((p) => p.metric === METRICS.storelinkRequestDuration),
    ).toMatchObject({
      unit: "s",
      count: 1,
      attributes: {
        [ATTR.urlTemplate]: "/v1/stores/{store_id}/stock/{sku}",
        [ATTR.httpMethod]: "GET",
        [ATTR.httpStatus]: 200,
      },
    });
    expect(receiver.points.find((p) => p.metric === METRICS.limitsAvailable)).toMatchObject({
      value: 0,
    });
  });
});

describe("sampling", () => {
  it("a write is exported under always_off, its client span too; a read is not", async () => {
    const receiver = await startOtlpReceiver();
    const telemetry = telemetryFor(receiver.url, { OTEL_TRACES_SAMPLER: "always_off" });
    const read = oneToolCall(telemetry, false);
    const write = oneToolCall(telemetry, true);
    expect(read.span.ids?.sampled).toBe(false);
    expect(write.span.ids?.sampled).toBe(true);
    // An unsampled span still carries the trace onward, marked unsampled.
    expect(read.span.traceparent).toMatch(new RegExp(`^00-${TRACE_ID}-[0-9a-f]{16}-00$`));
    await telemetry.shutdown(5000);
    const ids = receiver.spans.map((s) => s.spanId).sort();
    expect(ids).toEqual([write.span.ids?.spanId, write.client.ids?.spanId].sort());
    expect(receiver.spans.find((s) => s.kind === KIND.SERVER)?.attributes[ATTR.write]).toBe(true);
    // Metrics count every request, sampled or not.
    expect(receiver.points.find((p) => p.metric === METRICS.serverOperationDuration)?.count).toBe(
      2,
    );
  });

  it("under an unsampled read no client span is made: StoreLink gets the read's own context, unsampled, and its metric still counts", async () => {
    const receiver = await startOtlpReceiver();
    const telemetry = telemetryFor(receiver.url, { OTEL_TRACES_SAMPLER: "always_off" });
    const read = oneToolCall(telemetry, false, "tool_error");
    expect(read.client.ids).toBeUndefined();
    expect(read.client.traceparent).toBe(read.span.traceparent);
    expect(read.client.traceparent).toMatch(new RegExp(`^00-${TRACE_ID}-[0-9a-f]{16}-00$`));
    read.client.fail("unavailable");
    read.client.end();
    await telemetry.shutdown(5000);
    expect(receiver.spans).toEqual([]);
    // Its status set before its end; what is set after the end changes nothing.
    expect(
      receiver.points.find((p) => p.metric === METRICS.storelinkRequestDuration),
    ).toMatchObject({ count: 1, attributes: { [ATTR.httpStatus]: 200 } });
    expect(
      receiver.points.find((p) => p.metric === METRICS.storelinkRequestDuration)?.attributes,
    ).not.toHaveProperty(ATTR.errorType);
  });

  it("parentbased_always_on follows an unsampled parent for reads; an invalid parent is ignored", async () => {
    const receiver = await startOtlpReceiver();
    const telemetry = telemetryFor(receiver.url);
    const unsampled = telemetry.request({
      method: "tools/call",
      target: "get_stock",
      parent: { traceparent: `00-${TRACE_ID}-${PARENT_ID}-00` },
    });
    const invalid = telemetry.request({
      method: "tools/list",
      parent: { traceparent: "00-zz-not-a-context" },
    });
    unsampled.end();
    invalid.end();
    expect(unsampled.ids?.sampled).toBe(false);
    expect(invalid.ids?.traceId).not.toBe(TRACE_ID);
    await telemetry.shutdown(5000);
    expect(receiver.spans.map((s) => [s.name, s.parentSpanId])).toEqual([["tools/list", ""]]);
  });
});

describe("the configured sampler decides reads, as the SDK's tracer would ask it", () => {
  /** Which of a read under a sampled and an unsampled client context, and a root, is exported. */
  async function exportedUnder(env: Record<string, string>) {
    const receiver = await startOtlpReceiver();
    const telemetry = telemetryFor(receiver.url, env);
    const made = {
      sampledParent: telemetry.request({
        method: "tools/call",
        target: "a",
        parent: { traceparent: `00-${TRACE_ID}-${PARENT_ID}-01` },
      }),
      unsampledParent: telemetry.request({
        method: "tools/call",
        target: "b",
        parent: { traceparent: `00-${TRACE_ID}-${PARENT_ID}-00` },
      }),
      root: telemetry.request({ method: "tools/call", target: "c" }),
    };
    for (const span of Object.values(made)) span.end();
    await telemetry.shutdown(5000);
    return {
      exported: receiver.spans.map((s) => s.name).sort(),
      sampled: Object.entries(made)
        .filter(([, span]) => span.ids?.sampled === true)
        .map(([name]) => name)
        .sort(),
    };
  }

  it.each([
    ["parentbased_always_off", {}, ["tools/call a"], ["sampledParent"]],
    ["parentbased_always_on", {}, ["tools/call a", "tools/call c"], ["root", "sampledParent"]],
    // A ratio sampler that is not parent-based ignores the client's flag either way.
    ["traceidratio", { OTEL_TRACES_SAMPLER_ARG: "0" }, [], []],
    [
      "traceidratio",
      { OTEL_TRACES_SAMPLER_ARG: "1" },
      ["tools/call a", "tools/call b", "tools/call c"],
      ["root", "sampledParent", "unsampledParent"],
    ],
    [
      "always_on",
      {},
      ["tools/call a", "tools/call b", "tools/call c"],
      ["root", "sampledParent", "unsampledParent"],
    ],
  ])("%s %o", async (sampler, env, exported, sampled) => {
    expect(await exportedUnder({ OTEL_TRACES_SAMPLER: sampler, ...env })).toEqual({
      exported,
      sampled,
    });
  });

  it("a ratio keeps a share of root reads, and the spans it keeps are whole", async () => {
    const receiver = await startOtlpReceiver();
    const telemetry = telemetryFor(receiver.url, {
      OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
      OTEL_TRACES_SAMPLER_ARG: "0.25",
    });
    const sampled = new Set<string>();
    for (let i = 0; i < 400; i++) {
      const { span, client } = oneToolCallRoot(telemetry);
      if (span.ids?.sampled) sampled.add(`${span.ids.spanId} ${client.ids?.spanId}`);
      else expect(client.ids).toBeUndefined();
    }
    await telemetry.shutdown(5000);
    // 100 expected; a binomial draw of 400 at 0.25 falls outside 50..150 about once in 10^9.
    expect(sampled.size).toBeGreaterThan(50);
    expect(sampled.size).toBeLessThan(150);
    const byId = new Map(receiver.spans.map((s) => [s.spanId, s]));
    expect(receiver.spans).toHaveLength(2 * sampled.size);
    for (const pair of sampled) {
      const [server, client] = pair.split(" ").map((id) => byId.get(id));
      expect(server?.kind).toBe(KIND.SERVER);
      expect(client?.parentSpanId).toBe(server?.spanId);
      expect(client?.traceId).toBe(server?.traceId);
    }
  });

  it("a client span with no span of ours above it is a root, sampled as a read is", async () => {
    for (const [sampler, exported] of [
      ["always_on", 1],
      ["always_off", 0],
    ] as const) {
      const receiver = await startOtlpReceiver();
      const telemetry = telemetryFor(receiver.url, { OTEL_TRACES_SAMPLER: sampler });
      const span = telemetry.client(NO_SPAN, { name: "limits take", system: "limits" });
      expect(span.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/);
      span.end();
      await telemetry.shutdown(5000);
      expect(receiver.spans.map((s) => [s.name, s.parentSpanId])).toEqual(
        exported ? [["limits take", ""]] : [],
      );
    }
  });
});

describe("a collector that fails", () => {
  const cases: [string, () => Promise<{ url: string; receiver?: OtlpReceiver }>][] = [
    [
      "answers 500",
      async () => startOtlpReceiver("fail500").then((r) => ({ url: r.url, receiver: r })),
    ],
    [
      "never answers",
      async () => startOtlpReceiver("slow").then((r) => ({ url: r.url, receiver: r })),
    ],
    ["is down", async () => ({ url: `http://127.0.0.1:${await freePort()}` })],
  ];

  it.each(cases)(
    "%s: calls return, shutdown resolves within its bound, one ops line per kind",
    async (_, start) => {
      const { url, receiver } = await start();
      const ops = captureOpsLog();
      try {
        const telemetry = telemetryFor(url, { OTEL_EXPORTER_OTLP_TIMEOUT: "300" });
        // Two rounds of export failures: the second logs nothing new.
        for (let round = 0; round < 2; round++) {
          for (let i = 0; i < 600; i++) oneToolCall(telemetry, i % 2 === 0);
          // Waits for the batch's export to fail (a retryable failure is retried within the timeout).
          await new Promise((resolve) => setTimeout(resolve, 1000));
        }
        const settled = await Promise.race([
          telemetry.shutdown(1500).then(() => "resolved"),
          new Promise((resolve) => setTimeout(() => resolve("still waiting"), 10_000)),
        ]);
        expect(settled).toBe("resolved");
        // Still usable after the failures and the shutdown: nothing throws.
        oneToolCall(telemetry, true);
        if (receiver) expect(receiver.requests.length).toBeGreaterThan(0);
        expect(receiver?.spans ?? []).toEqual([]);
        const failures = ops.lines().filter((l) => l.telemetry !== undefined);
        const kinds = failures.map((l) => `${l.telemetry} ${l.kind}`);
        expect(failures.length).toBeGreaterThan(0);
        expect(new Set(kinds).size).toBe(kinds.length);
      } finally {
        ops.restore();
      }
    },
  );
});
