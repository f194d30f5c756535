import { randomUUID } from "node:crypto";
import { serveStdio } from "@modelcontextprotocol/server/stdio";
import { ConfigError, loadConfig, storelinkInUse } from "./config.js";
import { startDeps } from "./deps.js";
import { inflightCalls } from "./lifecycle/inflight.js";
import {
  finishAndExit,
  STOP_SIGNALS,
  TELEMETRY_FLUSH_MS,
  warnWhenInit,
} from "./lifecycle/shutdown.js";
import { unverifiedOrigin } from "./logging/call-record.js";
import { opsLog } from "./logging/ops.js";
import { createServer, SERVER_VERSION } from "./mcp/server.js";
import { unverifiedPrincipal } from "./policy/principal.js";
import { MAX_LINE_BYTES } from "./stdio/line-limiter.js";
import { LineStdioTransport, type Observe } from "./stdio/transport.js";
import { type Telemetry, traceParentOf } from "./telemetry/api.js";
import { ATTR, TRANSPORT } from "./telemetry/conventions.js";
import { loadTelemetry } from "./telemetry/load.js";

/** A SERVER span for an MCP request over stdio other than tools/call, ended by its answer. */
const spanOf =
  (telemetry: Telemetry): Observe =>
  (request) => {
    if (request.method === "tools/call") return undefined;
    const params = (request as { params?: { _meta?: unknown } }).params;
    const span = telemetry.request({
      method: request.method,
      parent: traceParentOf(params?._meta),
      attributes: { [ATTR.jsonrpcId]: String(request.id), [ATTR.transport]: TRANSPORT.stdio },
    });
    return (answer) => {
      if ("error" in answer) span.fail(String(answer.error.code));
      span.end();
    };
  };

// stdout carries JSON-RPC frames only; everything else goes to stderr.
async function main(): Promise<void> {
  const config = loadConfig();
  const { deps, recorder } = await startDeps(
    config,
    "stdio",
    // Off unless OTEL_EXPORTER_OTLP_ENDPOINT is set (nothing of OpenTelemetry is loaded then).
    await loadTelemetry(process.env, SERVER_VERSION),
  );
  const transport = new LineStdioTransport(process.stdin, process.stdout, {
    onOversize: (bytes) =>
      opsLog.warn(
        { bytes, limit: MAX_LINE_BYTES },
        "discarded an stdin line longer than the limit; answered Invalid Request and kept serving",
      ),
    // With telemetry on, every request but a tools/call (whose span is the call's) is a span.
    ...(deps.telemetry.enabled ? { observe: spanOf(deps.telemetry) } : {}),
  });
  // The connection's one client, named for this connection alone: confirmation state it was
  // given is refused by any other stdio process or connection, whatever key signs it.
  const caller = `stdio:${randomUUID()}`;
  const by = unverifiedPrincipal(config.principalLabel).id;
  let stdoutBroken = false;
  // The SDK picks the era from the opening exchange and pins one server for the connection.
  const connection = serveStdio(
    ({ era }) =>
      createServer(deps, {
        ...unverifiedOrigin(by, caller),
        era,
        asks2025: true,
        transport: "pipe",
      }),
    {
      transport,
      onerror: (error) => {
        // Reported once: the client closed its end of stdout (answers are lost, work goes on).
        if ((error as NodeJS.ErrnoException).code !== "EPIPE") {
          opsLog.debug({ err: error }, "MCP stdio message refused");
          return;
        }
        if (stdoutBroken) return;
        stdoutBroken = true;
        opsLog.warn(
          "stdout is closed: answers can no longer be delivered; running calls finish and are audited",
        );
      },
    },
  );
  // The end of stdin is the end of the session, but not of the work already asked for: every
  // request read is answered, and every tool call (a write above all) finishes and is audited,
  // within the grace period (lifecycle/shutdown.ts).
  let stopping = false;
  const stop = (cause: string): void => {
    if (stopping) return;
    stopping = true;
    opsLog.info(
      { cause },
      "stopping: no more input is read; the requests already read are answered and their calls finish",
    );
    // Then the calls: a cancelled request is not answered, but its tool call still runs.
    void finishAndExit(
      transport.whenAnswered().then(() => inflightCalls.whenIdle()),
      {
        graceMs: config.shutdownGraceMs,
        afterClose: async () => {
          await connection.close();
          await recorder.close();
          await deps.telemetry.shutdown(TELEMETRY_FLUSH_MS);
        },
      },
    );
  };
  // "end" of the line reader, not of stdin: it comes after the last line has been dispatched.
  transport.lines.once("end", () => stop("end of stdin"));
  // A second signal, or a SIGHUP (the terminal closed), only repeats the first: never a kill.
  for (const signal of STOP_SIGNALS) {
    process.on(signal, () => {
      // A line half read when the signal came is dropped; the requests already read are answered.
      transport.stopReading();
      stop(signal);
    });
  }
  warnWhenInit();
  // Only now the ready line: a client that stops the server the moment it reads it gets a stop
  // that drains and exits 0, never the default action of a signal nobody handles yet.
  // Which StoreLink answers (the URL's host, or the embedded demo): never a path, query or key.
  console.error(
    `korral-storelink MCP server running on stdio (StoreLink: ${storelinkInUse(config)})`,
  );
}

main().catch((error: unknown) => {
  console.error(
    error instanceof ConfigError ? error.message : "korral-storelink failed to start on stdio",
  );
  process.exit(error instanceof ConfigError ? 2 : 1);
});
