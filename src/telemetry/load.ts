import { NO_TELEMETRY, type Telemetry } from "./api.js";
import { readTelemetrySettings } from "./settings.js";

/**
 * The process's telemetry: NO_TELEMETRY unless an OTLP endpoint is configured (settings.ts);
 * only then is telemetry/otel.ts, and with it OpenTelemetry, imported. A bad OTEL_* value throws
 * a ConfigError naming the variable, before anything is loaded.
 */
export async function loadTelemetry(
  env: NodeJS.ProcessEnv = process.env,
  serviceVersion?: string,
): Promise<Telemetry> {
  const settings = readTelemetrySettings(env, serviceVersion);
  if (settings === undefined) return NO_TELEMETRY;
  const { createTelemetry } = await import("./otel.js");
  return createTelemetry(settings);
}
