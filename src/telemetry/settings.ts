import { z } from "zod";
import { parseEnv } from "../config.js";

/**
 * The standard OpenTelemetry variables the server honours, read once at start. Telemetry is on
 * only when an OTLP endpoint is given and OTEL_SDK_DISABLED is not `true`; a bad value is a
 * ConfigError naming the variable (the entry exits 2). This module imports nothing of
 * OpenTelemetry: it decides whether telemetry/otel.ts is loaded at all.
 */

export const PROTOCOLS = ["http/protobuf", "http/json"] as const;
export type Protocol = (typeof PROTOCOLS)[number];

export const SAMPLERS = [
  "always_on",
  "always_off",
  "traceidratio",
  "parentbased_always_on",
  "parentbased_always_off",
  "parentbased_traceidratio",
] as const;
export type SamplerName = (typeof SAMPLERS)[number];

export const DEFAULT_SERVICE_NAME = "korral-storelink-mcp";

export interface TelemetrySettings {
  serviceName: string;
  serviceVersion?: string | undefined;
  protocol: Protocol;
  /** Where spans go: the traces endpoint as given, else the base endpoint + `/v1/traces`. */
  tracesUrl: string;
  /** Where metrics go; undefined (no metrics) when only a traces endpoint is given. */
  metricsUrl: string | undefined;
  sampler: SamplerName;
  /** The ratio of `traceidratio` samplers, 0 to 1. */
  samplerRatio: number;
  metricIntervalMs: number;
  /** Upper bound on one export request (the exporter's own timeout). */
  exportTimeoutMs: number;
}

const httpUrl = z.url({ protocol: /^https?$/, error: "must be an http:// or https:// URL" });

const schema = z.object({
  OTEL_SDK_DISABLED: z
    .string()
    .transform((value) => value.trim().toLowerCase() === "true")
    .optional(),
  OTEL_EXPORTER_OTLP_ENDPOINT: httpUrl.optional(),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: httpUrl.optional(),
  OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: httpUrl.optional(),
  OTEL_EXPORTER_OTLP_PROTOCOL: z
    .enum(PROTOCOLS, { error: `must be one of ${PROTOCOLS.join(", ")}` })
    .default("http/protobuf"),
  OTEL_SERVICE_NAME: z.string().min(1).default(DEFAULT_SERVICE_NAME),
  OTEL_TRACES_SAMPLER: z
    .enum(SAMPLERS, { error: `must be one of ${SAMPLERS.join(", ")}` })
    .default("parentbased_always_on"),
  OTEL_TRACES_SAMPLER_ARG: z.coerce
    .number({ error: "must be a number from 0 to 1" })
    .min(0, "must be a number from 0 to 1")
    .max(1, "must be a number from 0 to 1")
    .default(1),
  OTEL_METRIC_EXPORT_INTERVAL: z.coerce
    .number({ error: "must be a whole number of milliseconds, at least 1000" })
    .int("must be a whole number of milliseconds, at least 1000")
    .min(1000, "must be a whole number of milliseconds, at least 1000")
    .default(60_000),
  OTEL_EXPORTER_OTLP_TIMEOUT: z.coerce
    .number({ error: "must be a whole number of milliseconds, 100 to 5000" })
    .int("must be a whole number of milliseconds, 100 to 5000")
    .min(100, "must be a whole number of milliseconds, 100 to 5000")
    .max(5000, "must be a whole number of milliseconds, 100 to 5000")
    .default(5000),
});

/** The base endpoint with a signal's path appended, as the OTLP exporter spec says. */
function signalUrl(base: string, path: string): string {
  return `${base.replace(/\/+$/, "")}/${path}`;
}

/**
 * The settings, or undefined when telemetry is off. Throws a ConfigError naming each bad
 * variable; the OTel variables are checked only when telemetry is on.
 */
export function readTelemetrySettings(
  env: NodeJS.ProcessEnv,
  serviceVersion?: string,
): TelemetrySettings | undefined {
  const wanted =
    (env.OTEL_EXPORTER_OTLP_ENDPOINT ?? "") !== "" ||
    (env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? "") !== "";
  if (!wanted || env.OTEL_SDK_DISABLED?.trim().toLowerCase() === "true") return undefined;
  const c = parseEnv(schema, env, "telemetry configuration");
  const base = c.OTEL_EXPORTER_OTLP_ENDPOINT;
  const tracesUrl = c.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? signalUrl(base as string, "v1/traces");
  const metricsUrl =
    c.OTEL_EXPORTER_OTLP_METRICS_ENDPOINT ??
    (base === undefined ? undefined : signalUrl(base, "v1/metrics"));
  return {
    serviceName: c.OTEL_SERVICE_NAME,
    serviceVersion,
    protocol: c.OTEL_EXPORTER_OTLP_PROTOCOL,
    tracesUrl,
    metricsUrl,
    sampler: c.OTEL_TRACES_SAMPLER,
    samplerRatio: c.OTEL_TRACES_SAMPLER_ARG,
    metricIntervalMs: c.OTEL_METRIC_EXPORT_INTERVAL,
    exportTimeoutMs: c.OTEL_EXPORTER_OTLP_TIMEOUT,
  };
}
