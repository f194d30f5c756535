import { readFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tempWorkspace } from "../helpers/fixtures.js";
import { HERO_REASON } from "../helpers/harness.js";
import { KIND, type OtlpReceiver, startOtlpReceiver } from "../helpers/otlp-receiver.js";
import {
  type RecordingStoreLink,
  startRecordingStoreLink,
} from "../helpers/recording-storelink.js";
import { MCP_HEADERS, toolCall } from "../helpers/rpc.js";
import {
  freePort,
  type Spawned,
  spawnDist,
  stdoutMessages,
  waitForHealthy,
} from "../helpers/spawn.js";

/**
 * One trace from the agent through the built service (dist/http.js) to StoreLink, as a real
 * OTLP/HTTP receiver on loopback gets it: the SERVER span has the agent's span (from
 * `params._meta.traceparent`) as its parent, the StoreLink CLIENT spans are its children, the
 * emulator sees a traceparent of the same trace, the write's span carries its audit outcome and
 * idempotency key, and the duration metric arrives. A receiver that fails changes nothing the
 * agent or the audit sees.
 */

const AGENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const AGENT_SPAN = "00f067aa0ba902b7";
const TRACEPARENT = `00-${AGENT_TRACE}-${AGENT_SPAN}-01`;

let ws: Awaited<ReturnType<typeof tempWorkspace>>;
let storelink: RecordingStoreLink;

beforeAll(async () => {
  ws = await tempWorkspace();
  storelink = await startRecordingStoreLink();
});
afterAll(async () => {
  await storelink?.close();
  if (ws) await rm(ws.dir, { recursive: true, force: true });
});

async function serve(
  receiver: OtlpReceiver,
  logDir: string,
  extra: Record<string, string> = {},
): Promise<{ server: Spawned; base: string }> {
  const port = await freePort();
  const server = spawnDist("http.js", {
    HOST: "127.0.0.1",
    PORT: String(port),
    STORELINK_URL: storelink.url,
    KORRAL_KEYS_FILE: ws.keysFile,
    KORRAL_LOG_DIR: logDir,
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_METRIC_EXPORT_INTERVAL: "1000",
    OTEL_BSP_SCHEDULE_DELAY: "100",
    ...extra,
  });
  const base = `http://127.0.0.1:${port}`;
  await waitForHealthy(server, `${base}/healthz`);
  return { server, base };
}

let seq = 0;
async function call(base: string, name: string, args: Record<string, unknown>) {
  const body = toolCall(++seq, name, args) as { params: Record<string, unknown> };
  body.params._meta = { traceparent: TRACEPARENT };
  const res = await fetch(`${base}/mcp`, {
    method: "POST",
    headers: MCP_HEADERS,
    body: JSON.stringify(body),
  });
  return ((await res.json()) as { result: { isError?: boolean; structuredContent?: unknown } })
    .result;
}

describe("telemetry through the built HTTP server", () => {
  it("a read and a write: SERVER spans under the agent's span, StoreLink CLIENT spans under them, traceparent at StoreLink, the metric", async () => {
    const receiver = await startOtlpReceiver("ok");
    const { server, base } = await serve(receiver, join(ws.dir, "log-ok"));
    try {
      const read = await call(base, "get_stock_position", { sku: "8847291", store_ids: ["47"] });
      expect(read.isError).toBeFalsy();
      const write = await call(base, "create_replenishment_order", {
        store_id: "47",
        sku: "8847291",
        quantity: 24,
        reason: HERO_REASON,
        idempotency_key: "traced-write-0001",
      });
      expect(write.isError).toBeFalsy();
      // Another method, its trace context in the HTTP header: a span of its own.
      const listed = await fetch(`${base}/mcp`, {
        method: "POST",
        headers: { ...MCP_HEADERS, traceparent: TRACEPARENT },
        body: JSON.stringify({ jsonrpc: "2.0", id: 99, method: "tools/list" }),
      });
      expect(listed.status).toBe(200);
      await server.until(
        () =>
          receiver.spans.filter((s) => s.kind === KIND.SERVER).length >= 3 &&
          receiver.points.some((p) => p.metric === "mcp.server.operation.duration"),
        "the spans and the metric at the receiver",
      );
    } finally {
      await server.stop();
    }
    const servers = receiver.spans.filter((s) => s.kind === KIND.SERVER);
    const readSpan = servers.find((s) => s.name === "tools/call get_stock_position");
    const writeSpan = servers.find((s) => s.name === "tools/call create_replenishment_order");
    for (const span of [readSpan, writeSpan]) {
      expect(span?.traceId).toBe(AGENT_TRACE);
      expect(span?.parentSpanId).toBe(AGENT_SPAN);
      expect(span?.attributes).toMatchObject({
        "mcp.method.name": "tools/call",
        "gen_ai.operation.name": "execute_tool",
        "network.transport": "tcp",
        "korral.store_id": "47",
      });
      expect(span?.attributes["korral.request_id"]).toMatch(/^req_[0-9a-f]{32}$/);
    }
    expect(servers.find((s) => s.name === "tools/list")).toMatchObject({
      traceId: AGENT_TRACE,
      parentSpanId: AGENT_SPAN,
    });
    expect(writeSpan?.attributes).toMatchObject({
      "korral.audit.outcome": "CREATED",
      "korral.idempotency_key": "traced-write-0001",
    });
    // Never the arguments or the reason.
    expect(JSON.stringify(receiver.spans)).not.toContain("on_hand 3 vs 11");
    // The StoreLink requests are CLIENT spans under the call's SERVER span, and StoreLink saw
    // the same trace.
    const stock = receiver.spans.find(
      (s) =>
        s.kind === KIND.CLIENT &&
        s.attributes["url.template"] === "/v1/stores/{store_id}/stock/{sku}",
    );
    expect(stock?.parentSpanId).toBe(readSpan?.spanId);
    expect(stock?.attributes["http.response.status_code"]).toBe(200);
    const create = receiver.spans.find(
      (s) =>
        s.kind === KIND.CLIENT && s.attributes["url.template"] === "/v1/stores/{store_id}/orders",
    );
    expect(create?.parentSpanId).toBe(writeSpan?.spanId);
    const posted = storelink.requests.find((r) => r.method === "POST");
    expect(posted?.traceparent).toMatch(new RegExp(`^00-${AGENT_TRACE}-${create?.spanId}-01$`));
    expect(
      receiver.points.some(
        (p) =>
          p.metric === "mcp.server.operation.duration" &&
          p.attributes["gen_ai.tool.name"] === "get_stock_position",
      ),
    ).toBe(true);
  });

  it("the structured log lines of a call name its SERVER span: 'show trace' lands on it", async () => {
    const receiver = await startOtlpReceiver("ok");
    const { server, base } = await serve(receiver, join(ws.dir, "log-structured"), {
      KORRAL_LOG_FILES: "off",
      GOOGLE_CLOUD_PROJECT: "korral-test",
    });
    try {
      const write = await call(base, "create_replenishment_order", {
        store_id: "47",
        sku: "8847291",
        quantity: 3,
        reason: HERO_REASON,
        idempotency_key: "traced-structured-01",
      });
      expect(write.isError).toBeFalsy();
      await server.until(
        () => receiver.spans.some((s) => s.name === "tools/call create_replenishment_order"),
        "the write's span",
      );
    } finally {
      await server.stop();
    }
    const span = receiver.spans.find((s) => s.name === "tools/call create_replenishment_order");
    const entries = server
      .stdout()
      .trimEnd()
      .split("\n")
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    const audit = entries.find((e) => e.log_type === "audit");
    const trace = entries.find((e) => e.log_type === "trace");
    for (const entry of [audit, trace]) {
      expect(entry?.["logging.googleapis.com/trace"]).toBe(
        `projects/korral-test/traces/${AGENT_TRACE}`,
      );
      expect(entry?.["logging.googleapis.com/spanId"]).toBe(span?.spanId);
    }
    expect(audit?.request_id).toBe(span?.attributes["korral.request_id"]);
  });

  it.each(["fail500", "slow"] as const)(
    "a receiver that answers %s changes nothing the agent or the audit sees",
    async (mode) => {
      const receiver = await startOtlpReceiver(mode);
      const logDir = join(ws.dir, `log-${mode}`);
      const { server, base } = await serve(receiver, logDir);
      try {
        const write = await call(base, "create_replenishment_order", {
          store_id: "47",
          sku: "8847291",
          quantity: 2,
          reason: HERO_REASON,
          idempotency_key: `traced-${mode}-0001`,
        });
        expect(write.isError).toBeFalsy();
        expect(write.structuredContent).toMatchObject({ mode: "submitted" });
      } finally {
        await server.stop();
      }
      const audit = readFileSync(join(logDir, "audit.log"), "utf8").trim().split("\n");
      expect(audit).toHaveLength(1);
      expect(audit[0]).toMatch(/ CREATED RPL-47-\d+ .* key=traced-\w+-0001 /);
    },
  );
});

describe("telemetry through the built stdio server", () => {
  it("a read over stdio: its SERVER span says pipe, under the agent's span; the flush at the end of stdin exports it", async () => {
    const receiver = await startOtlpReceiver("ok");
    const server = spawnDist("stdio.js", {
      KORRAL_KEYS_FILE: ws.keysFile,
      KORRAL_LOG_DIR: join(ws.dir, "log-stdio"),
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
    });
    const request = toolCall(1, "lookup_sku", { query: "butter" }) as {
      params: Record<string, unknown>;
    };
    request.params._meta = { traceparent: TRACEPARENT };
    server.child.stdin?.write(`${JSON.stringify(request)}\n`);
    const list = {
      jsonrpc: "2.0",
      id: 2,
      method: "tools/list",
      params: { _meta: { traceparent: TRACEPARENT } },
    };
    server.child.stdin?.write(`${JSON.stringify(list)}\n`);
    await server.until(() => stdoutMessages(server).length > 1, "the answers");
    // The end of stdin stops it: the span is exported within the stop's flush.
    server.child.stdin?.end();
    expect(await server.exit).toBe(0);
    const span = receiver.spans.find((s) => s.name === "tools/call lookup_sku");
    expect(span).toMatchObject({
      kind: KIND.SERVER,
      traceId: AGENT_TRACE,
      parentSpanId: AGENT_SPAN,
      format: "json",
    });
    expect(span?.attributes["network.transport"]).toBe("pipe");
    // Another method over stdio: a span of its own, under the agent's.
    expect(receiver.spans.find((s) => s.name === "tools/list")).toMatchObject({
      kind: KIND.SERVER,
      traceId: AGENT_TRACE,
      parentSpanId: AGENT_SPAN,
    });
  });
});
