import { describe, expect, it } from "vitest";
import { tracedStoreLink } from "../../src/mcp/traced-storelink.js";
import { isStoreLinkError } from "../../src/storelink/client.js";
import { HttpStoreLinkClient } from "../../src/storelink/http.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";
import { ATTR, METRICS } from "../../src/telemetry/conventions.js";
import { createTelemetry } from "../../src/telemetry/otel.js";
import { readTelemetrySettings } from "../../src/telemetry/settings.js";
import { KIND, startOtlpReceiver } from "../helpers/otlp-receiver.js";
import { startRecordingStoreLink } from "../helpers/recording-storelink.js";

/**
 * The CLIENT spans of StoreLink calls, made through tracedStoreLink as a tool call makes them,
 * exported to a real OTLP/HTTP receiver: one span per request actually sent (over HTTP to the
 * emulator on loopback), none for a call answered without one, and the StoreLink metric counts
 * the same requests.
 */

async function telemetryOn() {
  const receiver = await startOtlpReceiver();
  const settings = readTelemetrySettings(
    {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_TRACES_SAMPLER: "always_on",
      OTEL_METRIC_EXPORT_INTERVAL: "600000",
    },
    "9.9.9",
  );
  if (settings === undefined) throw new Error("telemetry should be on");
  return { receiver, telemetry: createTelemetry(settings) };
}

const refused = (promise: Promise<unknown>) =>
  promise.then(
    () => "answered",
    (error: unknown) => (isStoreLinkError(error) ? error.kind : "thrown"),
  );

describe("StoreLink CLIENT spans", () => {
  it("over HTTP: one per request sent, none for a cached directory or a call refused before sending", async () => {
    const storelink = await startRecordingStoreLink();
    const { receiver, telemetry } = await telemetryOn();
    try {
      const http = new HttpStoreLinkClient({ baseUrl: storelink.url });
      const server = telemetry.request({ method: "tools/call", target: "get_stock_position" });
      const client = tracedStoreLink(http, telemetry, server);
      await client.listStores();
      // Within the directory's cache: no request, so no span.
      await client.listStores();
      await client.getSku("8847291");
      expect(await refused(client.getSku("9999999"))).toBe("unknown_sku");
      // An id the client refuses is never sent.
      expect(await refused(client.getSku("../stores"))).not.toBe("answered");
      server.end();
      await telemetry.shutdown(5000);

      expect(storelink.requests.map((r) => r.target)).toEqual([
        "/v1/stores",
        "/v1/skus/8847291",
        "/v1/skus/9999999",
      ]);
      const serverSpan = receiver.spans.find((s) => s.kind === KIND.SERVER);
      const clients = receiver.spans.filter((s) => s.kind === KIND.CLIENT);
      expect(
        clients.map((s) => [s.name, s.attributes[ATTR.httpStatus], s.attributes[ATTR.errorType]]),
      ).toEqual([
        ["GET /v1/stores", 200, undefined],
        ["GET /v1/skus/{sku}", 200, undefined],
        ["GET /v1/skus/{sku}", 404, "unknown_sku"],
      ]);
      for (const [i, span] of clients.entries()) {
        expect(span.parentSpanId).toBe(serverSpan?.spanId);
        // Each request carried its own span's context.
        expect(storelink.requests[i]?.traceparent).toBe(`00-${span.traceId}-${span.spanId}-01`);
      }
      const directory = receiver.points.filter(
        (p) =>
          p.metric === METRICS.storelinkRequestDuration &&
          p.attributes[ATTR.urlTemplate] === "/v1/stores",
      );
      expect(directory.map((p) => p.count)).toEqual([1]);
    } finally {
      await storelink.close();
    }
  });

  it("embedded: every call stands for a request and has its span", async () => {
    const { receiver, telemetry } = await telemetryOn();
    const server = telemetry.request({ method: "tools/call", target: "get_stock_position" });
    const client = tracedStoreLink(new InMemoryStoreLink(), telemetry, server);
    await client.listStores();
    await client.listStores();
    expect(await refused(client.getSku("9999999"))).toBe("unknown_sku");
    server.end();
    await telemetry.shutdown(5000);
    const clients = receiver.spans.filter((s) => s.kind === KIND.CLIENT);
    expect(clients.map((s) => [s.name, s.attributes[ATTR.errorType]])).toEqual([
      ["GET /v1/stores", undefined],
      ["GET /v1/stores", undefined],
      ["GET /v1/skus/{sku}", "unknown_sku"],
    ]);
  });

  it("a client that throws instead of rejecting: the call rejects with its error and the span still ends", async () => {
    const { receiver, telemetry } = await telemetryOn();
    const inner = new InMemoryStoreLink();
    const broken = new Error("thrown synchronously");
    // A client breaking its contract (methods return promises) at the seam the spec names.
    inner.getSku = () => {
      throw broken;
    };
    const server = telemetry.request({ method: "tools/call", target: "lookup_sku" });
    const client = tracedStoreLink(inner, telemetry, server);
    await expect(client.getSku("8847291")).rejects.toBe(broken);
    server.end();
    await telemetry.shutdown(5000);
    const clients = receiver.spans.filter((s) => s.kind === KIND.CLIENT);
    expect(clients.map((s) => [s.name, s.attributes[ATTR.errorType]])).toEqual([
      ["GET /v1/skus/{sku}", "internal"],
    ]);
    const points = receiver.points.filter((p) => p.metric === METRICS.storelinkRequestDuration);
    expect(points.map((p) => [p.attributes[ATTR.errorType], p.count])).toEqual([["internal", 1]]);
  });
});
