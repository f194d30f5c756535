/**
 * `npm run bench:telemetry-work`: the CPU of telemetry's own work for one read, in process and
 * without the rest of the server (so without its noise): the SERVER span of a three-store
 * `get_stock_position` and the CLIENT spans of its five StoreLink calls (the directory, the SKU,
 * three stock readings), made as mcp/call-tool.ts and mcp/traced-storelink.ts make them, with
 * their metrics, exported to a sink in a child process. StoreLink is a stub that answers at once,
 * the same off and on, so the difference is telemetry's. Sampled as issue 33 budgets it (10% of
 * reads); a root span per read, then again with an agent's `traceparent` (sampled on one read in
 * ten). Prints µs per read for each, and off.
 */
import { type ChildProcess, fork } from "node:child_process";
import { once } from "node:events";
import type { ApiKey } from "../src/keys/api-key.js";
import { tracedStoreLink } from "../src/mcp/traced-storelink.js";
import type { StoreLinkClient } from "../src/storelink/client.js";
import { NO_TELEMETRY, type Telemetry } from "../src/telemetry/api.js";
import { ATTR, OPERATION_EXECUTE_TOOL } from "../src/telemetry/conventions.js";
import { createTelemetry } from "../src/telemetry/otel.js";
import { readTelemetrySettings } from "../src/telemetry/settings.js";

const READS = Number(process.env.BENCH_READS) || 200_000;
const STORES = ["47", "12", "3"];

/** StoreLink answering at once: only the calls a read makes. */
const answered = Promise.resolve({});
const stub = {
  listStores: () => answered,
  getSku: () => answered,
  getStock: () => answered,
} as unknown as StoreLinkClient;
const key = {} as ApiKey;

async function oneRead(telemetry: Telemetry, i: number, traced: boolean): Promise<void> {
  const flags = i % 10 === 0 ? "01" : "00";
  const parent = traced
    ? { traceparent: `00-${(i + 1).toString(16).padStart(32, "0")}-00f067aa0ba902b7-${flags}` }
    : undefined;
  const span = telemetry.request({
    method: "tools/call",
    target: "get_stock_position",
    parent,
    attributes: {
      [ATTR.toolName]: "get_stock_position",
      [ATTR.operationName]: OPERATION_EXECUTE_TOOL,
      [ATTR.jsonrpcId]: String(i),
      [ATTR.protocolVersion]: "2025-06-18",
      [ATTR.transport]: "tcp",
    },
  });
  if (span.ids === undefined && telemetry.enabled) throw new Error("a request span has no ids");
  span.set({ [ATTR.requestId]: `req-${i}` });
  const storelink = telemetry.enabled ? tracedStoreLink(stub, telemetry, span) : stub;
  await storelink.listStores();
  await storelink.getSku("4006381333931");
  await Promise.all(STORES.map((store) => storelink.getStock(store, "4006381333931", key)));
  span.set({ [ATTR.storeId]: "47", [ATTR.auditOutcome]: undefined });
  span.end();
}

/** CPU µs per read over `READS` reads, after a warm-up. */
async function measure(telemetry: Telemetry, traced: boolean): Promise<number> {
  for (let i = 0; i < 20_000; i++) await oneRead(telemetry, i, traced);
  const start = process.cpuUsage();
  for (let batch = 0; batch < READS / 1000; batch++) {
    for (let i = 0; i < 1000; i++) await oneRead(telemetry, batch * 1000 + i, traced);
    // Let the batch processor's timer and the exporter run, as between requests.
    await new Promise((resolve) => setImmediate(resolve));
  }
  const used = process.cpuUsage(start);
  return (used.user + used.system) / READS;
}

async function main(): Promise<void> {
  // The sink in its own process: its CPU is the collector's, not ours.
  const sink: ChildProcess = fork(new URL("./otlp-sink.ts", import.meta.url), ["--serve"], {
    execArgv: ["--import", "tsx"],
  });
  const [url] = (await once(sink, "message")) as [string];
  const settings = readTelemetrySettings(
    {
      OTEL_EXPORTER_OTLP_ENDPOINT: url,
      // As issue 33 budgets it, unless the sampler is named (always_on: the cost of a recorded read).
      OTEL_TRACES_SAMPLER: process.env.OTEL_TRACES_SAMPLER ?? "parentbased_traceidratio",
      OTEL_TRACES_SAMPLER_ARG: process.env.OTEL_TRACES_SAMPLER_ARG ?? "0.1",
    },
    "bench",
  );
  if (settings === undefined) throw new Error("telemetry settings");
  const telemetry = createTelemetry(settings);
  const off = await measure(NO_TELEMETRY, false);
  const root = await measure(telemetry, false);
  const traced = await measure(telemetry, true);
  await telemetry.shutdown(2000);
  sink.kill();
  process.stdout.write(
    `telemetry's own CPU per three-store read (on minus off): ${(root - off).toFixed(1)} µs (root spans), ${(traced - off).toFixed(1)} µs (agent's traceparent); off ${off.toFixed(2)} µs a read\n`,
  );
}

await main();
