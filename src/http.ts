import type { Server as HttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import { pathToFileURL } from "node:url";
import { type Config, ConfigError, loadConfig, storelinkInUse } from "./config.js";
import { startDeps } from "./deps.js";
import { allowedHostsFor, createApp } from "./http/app.js";
import type { AuthGate } from "./http/auth/gate.js";
import type { ReconcileReport } from "./lifecycle/reconcile.js";
import {
  drainAndExit,
  STOP_SIGNALS,
  TELEMETRY_FLUSH_MS,
  warnWhenInit,
} from "./lifecycle/shutdown.js";
import { sharedLimitsFor } from "./limits/index.js";
import { opsLog } from "./logging/ops.js";
import type { CallRecorder } from "./logging/records.js";
import { SERVER_VERSION } from "./mcp/server.js";
import { unverifiedPrincipal } from "./policy/principal.js";
import { loadTelemetry } from "./telemetry/load.js";
import type { Deps } from "./tools/define.js";

/**
 * Listens with `config`'s host, port and HTTP options and stops cleanly on SIGTERM/SIGINT,
 * waiting up to `config.shutdownGraceMs` for requests and tool calls (lifecycle/shutdown.ts). `afterClose`
 * runs once they are done, or the grace is over (flush the logs there).
 */
export function serve(
  deps: Deps,
  config: Config,
  afterClose?: () => Promise<void>,
  auth?: AuthGate,
  reconcile?: () => Promise<ReconcileReport>,
): HttpServer {
  const storelink = storelinkInUse(config);
  const shared = sharedLimitsFor(config);
  const app = createApp(deps, {
    allowedHosts: allowedHostsFor(config),
    allowedOrigins: config.allowedOrigins,
    unverifiedPrincipal: unverifiedPrincipal(config.principalLabel).id,
    storelink,
    ...(shared ? { limits: shared.health } : {}),
    ...(auth ? { auth } : {}),
    ...(reconcile ? { reconcile } : {}),
  });
  // Express 5 hands a listen error to this callback; without a check it crashed on a null address.
  const listener = app.listen(config.port, config.host, (error?: Error) => {
    if (error) {
      console.error(listenErrorMessage(error, config));
      process.exit(1);
    }
    const { port } = listener.address() as AddressInfo;
    opsLog.info(
      { host: config.host, port, storelink },
      "korral-storelink MCP server listening on HTTP",
    );
  });
  let stopping = false;
  const stop = (): void => {
    // The first signal starts the drain; a later one (a second SIGTERM, an impatient Ctrl-C, a
    // SIGHUP) changes nothing: the running writes still finish and are audited within the grace.
    if (stopping) return;
    stopping = true;
    drainAndExit(listener, {
      graceMs: config.shutdownGraceMs,
      ...(afterClose ? { afterClose } : {}),
    });
  };
  for (const signal of STOP_SIGNALS) process.on(signal, stop);
  warnWhenInit();
  return listener;
}

/** One line a person can act on, for an error of `listen` (no stack: it is not a bug). */
export function listenErrorMessage(error: Error, config: Pick<Config, "host" | "port">): string {
  const code = (error as NodeJS.ErrnoException).code;
  const where = `${config.host}:${config.port}`;
  switch (code) {
    case "EADDRINUSE":
      return `korral-storelink: port ${config.port} is in use; set PORT to a free port (or stop the process holding it)`;
    case "EACCES":
      return `korral-storelink: not allowed to listen on ${where} (EACCES); set PORT to 1024 or above`;
    case "EADDRNOTAVAIL":
      return `korral-storelink: HOST ${config.host} is not an address of this machine (EADDRNOTAVAIL); set HOST to 127.0.0.1 locally or 0.0.0.0 in a container`;
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return `korral-storelink: HOST ${config.host} does not resolve (${code}); set HOST to an IP address such as 127.0.0.1 or 0.0.0.0`;
    default:
      return `korral-storelink: cannot listen on ${where} (${code ?? error.name}); check HOST and PORT`;
  }
}

function warnOfEphemeralKey(config: Config): void {
  if (config.requestStateKey !== undefined) return;
  opsLog.warn(
    "KORRAL_REQUEST_STATE_KEY is unset: buyer confirmations are signed with a key of this process only, so replicas will not accept each other's",
  );
}

/**
 * The resource server KORRAL_AUTH asks for, or undefined for `none`, auditing the writes it
 * refuses to `recorder`. Loaded only then: jose and the verifiers stay out of a start that never
 * uses them.
 */
async function authGateFor(config: Config, recorder: CallRecorder): Promise<AuthGate | undefined> {
  if (config.auth.kinds.length === 0) return undefined;
  const { authGate } = await import("./http/auth/gate.js");
  const gate = authGate(config.auth, recorder);
  gate.warm();
  opsLog.info(
    {
      auth: config.auth.kinds.join(","),
      ...(config.auth.kinds.includes("oauth") ? { issuer: new URL(config.auth.issuer).host } : {}),
    },
    "HTTP callers are authenticated",
  );
  return gate;
}

async function main(): Promise<void> {
  // Production's HTTP requirements (the shared state key, the limits store) are checked with the
  // rest: one refused start lists every missing or invalid variable.
  const config = loadConfig(process.env, "http");
  const { deps, recorder, reconciler } = await startDeps(
    config,
    "http",
    // Off unless OTEL_EXPORTER_OTLP_ENDPOINT is set (nothing of OpenTelemetry is loaded then).
    await loadTelemetry(process.env, SERVER_VERSION),
  );
  warnOfEphemeralKey(config);
  // The audit lines are synced first; telemetry's export after them, within its own bound.
  const afterClose = async () => {
    await recorder.close();
    await deps.telemetry.shutdown(TELEMETRY_FLUSH_MS);
  };
  serve(deps, config, afterClose, await authGateFor(config, deps.recorder), () => reconciler.run());
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((error: unknown) => {
    console.error(
      error instanceof ConfigError ? error.message : "korral-storelink failed to start on HTTP",
    );
    process.exit(error instanceof ConfigError ? 2 : 1);
  });
}
