import { ConfigError, loadConfig } from "./config.js";
import { startDeps } from "./deps.js";
import { inflightCalls } from "./lifecycle/inflight.js";
import { finishAndExit, STOP_SIGNALS } from "./lifecycle/shutdown.js";
import { opsLog } from "./logging/ops.js";
import { createServer } from "./server.js";
import { modernStdio } from "./stdio/modern.js";
import { LineLimitedStdioTransport, MAX_LINE_BYTES } from "./stdio/transport.js";
import { storelinkInUse } from "./storelink/index.js";

// stdout carries JSON-RPC frames only; everything else goes to stderr.
async function main(): Promise<void> {
  const config = loadConfig();
  const { deps, recorder } = await startDeps(config, "stdio");
  const server = createServer(deps);
  const transport = new LineLimitedStdioTransport(process.stdin, process.stdout, {
    onOversize: (bytes) =>
      opsLog.warn(
        { bytes, limit: MAX_LINE_BYTES },
        "discarded an stdin line longer than the limit; answered Invalid Request and kept serving",
      ),
  });
  let stdoutBroken = false;
  server.onerror = (error) => {
    // Reported once: the client closed its end of stdout (answers are lost, work goes on).
    if ((error as NodeJS.ErrnoException).code !== "EPIPE" || stdoutBroken) return;
    stdoutBroken = true;
    opsLog.warn(
      "stdout is closed: answers can no longer be delivered; running calls finish and are audited",
    );
  };
  await server.connect(transport);
  // 2026-07-28 lines go to the SDK v2 leg, whatever came before them; the rest to `server`.
  const modern = modernStdio(deps, transport);
  transport.divert = modern.divert;
  // Which StoreLink answers (the URL's host, or the embedded demo): never a path, query or key.
  console.error(
    `korral-storelink MCP server running on stdio (StoreLink: ${storelinkInUse(config)})`,
  );

  // The end of stdin is the end of the session, but not of the work already asked for: every
  // request read is answered, and every tool call (a write above all) finishes and is audited,
  // within the grace period (lifecycle/shutdown.ts).
  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    // Then the calls: a cancelled request is not answered, but its tool call still runs.
    void finishAndExit(
      transport.whenAnswered().then(() => inflightCalls.whenIdle()),
      {
        graceMs: config.shutdownGraceMs,
        afterClose: async () => {
          await modern.close();
          await server.close();
          await recorder.close();
        },
      },
    );
  };
  // "end" of the line reader, not of stdin: it comes after the last line has been dispatched.
  transport.lines.once("end", stop);
  const stopReading = (): void => {
    // A line half read when the signal came is dropped; the requests already read are answered.
    transport.stopReading();
    stop();
  };
  // A second signal, or a SIGHUP (the terminal closed), only repeats the first: never a kill.
  for (const signal of STOP_SIGNALS) process.on(signal, stopReading);
}

main().catch((error: unknown) => {
  console.error(
    error instanceof ConfigError ? error.message : "korral-storelink failed to start on stdio",
  );
  process.exit(error instanceof ConfigError ? 2 : 1);
});
