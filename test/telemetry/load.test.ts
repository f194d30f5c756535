import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { ConfigError } from "../../src/config.js";
import { NO_TELEMETRY } from "../../src/telemetry/api.js";
import { loadTelemetry } from "../../src/telemetry/load.js";
import { readTelemetrySettings } from "../../src/telemetry/settings.js";
import { startOtlpReceiver } from "../helpers/otlp-receiver.js";
import { DIST, runOk } from "../helpers/spawn.js";

/**
 * Telemetry is off unless an OTLP endpoint is given, and off means OpenTelemetry is never loaded:
 * a spawned Node, importing the built loader with a module hook that lists every file it loads.
 */

const ENDPOINT = "http://127.0.0.1:4318";

describe("loadTelemetry", () => {
  it("is NO_TELEMETRY without an endpoint, and with OTEL_SDK_DISABLED=true", async () => {
    expect(await loadTelemetry({})).toBe(NO_TELEMETRY);
    expect(await loadTelemetry({ OTEL_EXPORTER_OTLP_ENDPOINT: "" })).toBe(NO_TELEMETRY);
    expect(
      await loadTelemetry({ OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT, OTEL_SDK_DISABLED: "true" }),
    ).toBe(NO_TELEMETRY);
    expect(
      await loadTelemetry({
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: ENDPOINT,
        OTEL_SDK_DISABLED: "TRUE",
      }),
    ).toBe(NO_TELEMETRY);
  });

  it("is on with the endpoint, or the traces endpoint alone", async () => {
    for (const env of [
      { OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT, OTEL_SDK_DISABLED: "false" },
      { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${ENDPOINT}/custom` },
    ]) {
      const telemetry = await loadTelemetry(env);
      expect(telemetry.enabled).toBe(true);
      await telemetry.shutdown(100);
    }
  });

  it("reads the endpoints and defaults as the OTLP exporter spec says", () => {
    expect(readTelemetrySettings({ OTEL_EXPORTER_OTLP_ENDPOINT: `${ENDPOINT}/` })).toMatchObject({
      serviceName: "korral-storelink-mcp",
      protocol: "http/protobuf",
      tracesUrl: `${ENDPOINT}/v1/traces`,
      metricsUrl: `${ENDPOINT}/v1/metrics`,
      sampler: "parentbased_always_on",
      metricIntervalMs: 60_000,
    });
    expect(
      readTelemetrySettings({
        OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT,
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://collector:4318/t",
        OTEL_SERVICE_NAME: "svc",
        OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
        OTEL_TRACES_SAMPLER_ARG: "0.1",
      }),
    ).toMatchObject({
      serviceName: "svc",
      tracesUrl: "http://collector:4318/t",
      metricsUrl: `${ENDPOINT}/v1/metrics`,
      samplerRatio: 0.1,
    });
    // Only a traces endpoint: no metrics.
    expect(
      readTelemetrySettings({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: ENDPOINT })?.metricsUrl,
    ).toBeUndefined();
  });

  it.each([
    ["OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"],
    ["OTEL_TRACES_SAMPLER", "sometimes"],
    ["OTEL_TRACES_SAMPLER_ARG", "1.5"],
    ["OTEL_TRACES_SAMPLER_ARG", "-0.1"],
    ["OTEL_TRACES_SAMPLER_ARG", "half"],
    ["OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318"],
    ["OTEL_METRIC_EXPORT_INTERVAL", "10"],
  ])("refuses %s=%s, naming it, before loading anything", async (name, value) => {
    const env = { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: ENDPOINT, [name]: value };
    const refused = await loadTelemetry(env).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(ConfigError);
    expect((refused as ConfigError).message).toContain(`${name}:`);
  });
});

describe("modules loaded (built dist/, spawned)", () => {
  const dir = mkdtempSync(join(tmpdir(), "korral-otel-load-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** Strings of OpenTelemetry's API and SDK that survive the bundler (keepNames). */
  const MARKERS = ["opentelemetry.js.api", "BatchSpanProcessor", "OTLPTraceExporter"];

  /** Every file a Node that loads the built loader and asks for telemetry loads, and its answer. */
  async function loadedWith(env: Record<string, string>, name: string) {
    const log = join(dir, `${name}.log`);
    const hooks = `import { appendFileSync } from "node:fs";
export async function load(url, context, next) {
  if (url.startsWith("file:")) appendFileSync(${JSON.stringify(log)}, url + "\\n");
  return next(url, context);
}`;
    const register = `import { register } from "node:module";
register(${JSON.stringify(`data:text/javascript,${encodeURIComponent(hooks)}`)});`;
    const script = `const { loadTelemetry } = await import(${JSON.stringify(`${DIST}telemetry/load.js`)});
const telemetry = await loadTelemetry();
telemetry.request({ method: "tools/list" }).end();
await telemetry.shutdown(2000);
console.log(JSON.stringify({ enabled: telemetry.enabled }));`;
    const { stdout } = await runOk(
      process.execPath,
      [
        "--import",
        `data:text/javascript,${encodeURIComponent(register)}`,
        "--input-type=module",
        "-e",
        script,
      ],
      { env: { PATH: process.env.PATH ?? "", ...env }, timeoutMs: 30_000 },
    );
    const files = readFileSync(log, "utf8")
      .trim()
      .split("\n")
      .map((url) => fileURLToPath(url));
    const texts = files.map((file) => readFileSync(file, "utf8"));
    const withMarkers = files.filter((_, i) =>
      MARKERS.some((marker) => texts[i]?.includes(marker)),
    );
    const markersFound = MARKERS.filter((marker) => texts.some((text) => text.includes(marker)));
    return { answer: JSON.parse(stdout) as { enabled: boolean }, files, withMarkers, markersFound };
  }

  it("off: the loader and its imports only, none of them OpenTelemetry", async () => {
    const off = await loadedWith({}, "off");
    expect(off.answer.enabled).toBe(false);
    expect(off.files).toContain(`${DIST}telemetry/load.js`);
    expect(off.files).not.toContain(`${DIST}telemetry/otel.js`);
    expect(off.withMarkers).toEqual([]);
    const disabled = await loadedWith(
      { OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT, OTEL_SDK_DISABLED: "true" },
      "disabled",
    );
    expect(disabled.answer.enabled).toBe(false);
    expect(disabled.withMarkers).toEqual([]);
  });

  it("on: telemetry/otel.ts and OpenTelemetry are loaded, and a span reaches the receiver", async () => {
    const receiver = await startOtlpReceiver();
    const on = await loadedWith({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url }, "on");
    expect(on.answer.enabled).toBe(true);
    expect(on.files).toContain(`${DIST}telemetry/otel.js`);
    expect(on.markersFound).toEqual(MARKERS);
    expect(receiver.spans.map((s) => s.name)).toEqual(["tools/list"]);
  });
});
