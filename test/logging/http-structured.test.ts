import { Writable } from "node:stream";
import request from "supertest";
import { afterEach, describe, expect, it } from "vitest";
import { composeDeps } from "../../src/deps.js";
import { createApp } from "../../src/http/app.js";
import { createOpsLogger } from "../../src/logging/ops.js";
import { createRecorder } from "../../src/logging/recorder.js";
import { setTraceProject, traceFieldsFromHeaders } from "../../src/logging/trace-context.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";
import { HERO_REASON, MapKeyProvider } from "../helpers/harness.js";

const ACCEPT = "application/json, text/event-stream";
const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";

afterEach(() => setTraceProject(undefined));

function appWithStructuredLines() {
  const lines: string[] = [];
  const recorder = createRecorder({
    dir: "/unused",
    files: false,
    structured: (l) => lines.push(l),
  });
  const app = createApp(
    composeDeps({
      storelink: new InMemoryStoreLink(),
      keys: new MapKeyProvider(),
      recorder,
    }),
  );
  return { app, lines };
}

const call = (id: number, name: string, args: unknown) => ({
  jsonrpc: "2.0",
  id,
  method: "tools/call",
  params: { name, arguments: args },
});

describe("HTTP mode: every trace and audit record is also one structured stdout line", () => {
  it("writes Cloud Logging entries that tell audit from trace, with the request's trace", async () => {
    setTraceProject("korral-prod");
    const { app, lines } = appWithStructuredLines();
    const sent = await request(app)
      .post("/mcp")
      .set("accept", ACCEPT)
      .set("traceparent", `00-${TRACE_ID}-00f067aa0ba902b7-01`)
      .send(
        call(1, "create_replenishment_order", {
          store_id: "47",
          sku: "8847291",
          quantity: 24,
          reason: `${HERO_REASON} Pasted Bearer abcdef1234567890 by mistake.`,
        }),
      );
    expect(sent.status).toBe(200);
    expect(sent.body.result.structuredContent.order_id).toBe("RPL-47-001");
    await request(app)
      .post("/mcp")
      .set("accept", ACCEPT)
      .set("x-cloud-trace-context", `${"a".repeat(32)}/123;o=1`)
      .send(call(2, "get_stock_position", { sku: "0000000", store_ids: ["47", "63"] }));

    const entries = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(entries.map((e) => [e.log_type, e.severity])).toEqual([
      ["intent", "NOTICE"],
      ["audit", "NOTICE"],
      ["trace", "INFO"],
      ["trace", "WARNING"],
    ]);
    const [intent, audit, trace, failed] = entries;
    // Written before the order was sent: an intent with no audit entry is a write a kill cut off.
    expect(intent).toMatchObject({ request_id: audit?.request_id, store_id: "47", quantity: 24 });
    expect(intent?.message).toMatch(
      /^INTENT store=47 sku=8847291 qty=24 req=req_\S+ by=(?:os|local):\S+ key=korral-[0-9a-f-]{36} reason="/,
    );
    expect(JSON.stringify(intent)).not.toContain("abcdef1234567890");
    expect(audit).toMatchObject({
      outcome: "CREATED",
      order_id: "RPL-47-001",
      store_id: "47",
      quantity: 24,
      "logging.googleapis.com/trace": `projects/korral-prod/traces/${TRACE_ID}`,
      "logging.googleapis.com/spanId": "00f067aa0ba902b7",
    });
    expect(audit?.message).toMatch(/^\S+Z CREATED RPL-47-001 store=47 sku=8847291 qty=24 req=/);
    expect(audit?.request_id).toBe(trace?.request_id);
    expect(trace).toMatchObject({
      tool: "create_replenishment_order",
      status: "ok",
      store_id: "47",
    });
    expect(failed).toMatchObject({
      tool: "get_stock_position",
      store_id: null,
      args: { sku: "0000000", store_ids: ["47", "63"] },
      "logging.googleapis.com/trace": `projects/korral-prod/traces/${"a".repeat(32)}`,
      "logging.googleapis.com/spanId": "000000000000007b",
    });
    expect(lines.join("\n")).not.toContain("abcdef1234567890");
    expect(lines.join("\n")).toContain("Pasted [REDACTED] by mistake");
  });

  it("adds no trace fields without a project id", async () => {
    const { app, lines } = appWithStructuredLines();
    await request(app)
      .post("/mcp")
      .set("accept", ACCEPT)
      .set("traceparent", `00-${TRACE_ID}-00f067aa0ba902b7-01`)
      .send(call(1, "lookup_sku", { query: "butter" }));
    expect(lines).toHaveLength(1);
    expect(lines[0]).not.toContain("logging.googleapis.com");
  });
});

describe("trace headers", () => {
  it("prefers traceparent, falls back to X-Cloud-Trace-Context, ignores junk", () => {
    expect(
      traceFieldsFromHeaders(
        {
          traceparent: `00-${TRACE_ID}-00f067aa0ba902b7-00`,
          "x-cloud-trace-context": `${"b".repeat(32)}/1`,
        },
        "p",
      ),
    ).toEqual({
      "logging.googleapis.com/trace": `projects/p/traces/${TRACE_ID}`,
      "logging.googleapis.com/spanId": "00f067aa0ba902b7",
      "logging.googleapis.com/trace_sampled": false,
    });
    expect(traceFieldsFromHeaders({ traceparent: "garbage" }, "p")).toEqual({});
    expect(
      traceFieldsFromHeaders({ traceparent: `00-${"0".repeat(32)}-00f067aa0ba902b7-01` }, "p"),
    ).toEqual({});
    expect(traceFieldsFromHeaders({ "x-cloud-trace-context": "nothex/12" }, "p")).toEqual({});
    expect(
      traceFieldsFromHeaders({ traceparent: `00-${TRACE_ID}-00f067aa0ba902b7-01` }, undefined),
    ).toEqual({});
  });
});

describe("ops log in HTTP mode", () => {
  it("uses severity and message instead of pino's level and msg, keeping trace fields given", () => {
    const out: string[] = [];
    const destination = new Writable({
      write(chunk, _enc, done) {
        out.push(String(chunk));
        done();
      },
    });
    const log = createOpsLogger({ format: "cloud", level: "debug", destination });
    log.warn(
      { file: "/x/audit.log", "logging.googleapis.com/trace": "projects/p/traces/t" },
      "cannot write log file",
    );
    log.debug("access");
    const [warn, debug] = out.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(warn).toMatchObject({
      severity: "WARNING",
      message: "cannot write log file",
      file: "/x/audit.log",
      "logging.googleapis.com/trace": "projects/p/traces/t",
    });
    expect(warn).not.toHaveProperty("level");
    expect(warn).not.toHaveProperty("msg");
    expect(typeof warn?.time).toBe("string");
    expect(debug).toMatchObject({ severity: "DEBUG", message: "access" });
    expect(debug).not.toHaveProperty("logging.googleapis.com/trace");
  });
});
