import pino, { type DestinationStream, type Level, type Logger } from "pino";
import { escapeLineTerminators } from "./format.js";
import { redact } from "./redact.js";

export type OpsFormat = "plain" | "cloud";

export interface OpsLogOptions {
  /** "cloud": Cloud Logging's structured fields (HTTP mode); "plain": pino's defaults. */
  format: OpsFormat;
  level: Level | "silent";
  /** Where lines go; stderr unless a test passes its own stream. */
  destination?: DestinationStream;
}

// pino level labels to Cloud Logging's LogSeverity names.
const SEVERITY: Record<string, string> = {
  trace: "DEBUG",
  debug: "DEBUG",
  info: "INFO",
  warn: "WARNING",
  error: "ERROR",
  fatal: "CRITICAL",
};

/**
 * An unexpected error is logged with its cause, and a cause's message or stack can quote what it
 * was handling: a key in a header, a URL, a library's error text. Same redaction as the trace log.
 */
const serializers = {
  err: (error: unknown) =>
    redact(error instanceof Error ? pino.stdSerializers.err(error) : error) as Record<
      string,
      unknown
    >,
};

/**
 * Operational log: startup, configuration summary, errors, HTTP access (debug). Always on
 * stderr: in stdio mode stdout belongs to the JSON-RPC transport. In HTTP mode the lines carry
 * Cloud Logging's fields (`severity`, `message`, `logging.googleapis.com/trace` of the request).
 */
export function createOpsLogger(options: OpsLogOptions): Logger {
  const destination = oneLinePerEntry(
    options.destination ?? pino.destination({ dest: 2, sync: false }),
  );
  if (options.format === "plain") {
    return pino(
      { name: "korral-storelink", level: options.level, base: undefined, serializers },
      destination,
    );
  }
  return pino(
    {
      level: options.level,
      serializers,
      base: undefined,
      messageKey: "message",
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: {
        level: (label) => ({ severity: SEVERITY[label] ?? "DEFAULT" }),
      },
    },
    destination,
  );
}

/**
 * The ops log is line-oriented too: pino's JSON leaves NEL, U+2028 and U+2029 raw, and text from
 * a client can reach it (a URL in the debug access log, an error's message), so a reader that
 * splits on them would see a forged line. One regex test per entry; a copy only when one is there.
 */
function oneLinePerEntry(destination: DestinationStream): DestinationStream {
  const target = destination as DestinationStream & {
    flush?: (cb?: (error?: Error) => void) => void;
    flushSync?: () => void;
  };
  const wrapped: typeof target = {
    write: (line: string) => target.write(escapeLineTerminators(line)),
  };
  // Forwarded, not inherited: sonic-boom keeps its state on `this`.
  if (target.flush) wrapped.flush = (cb) => target.flush?.(cb);
  if (target.flushSync) wrapped.flushSync = () => target.flushSync?.();
  return wrapped;
}

/**
 * The process's operational logger. A live binding: `configureOpsLog()` replaces it once the
 * configuration is known, and every `opsLog.x()` call reads the current one.
 */
export let opsLog: Logger = createOpsLogger({ format: "plain", level: "info" });

export function configureOpsLog(options: OpsLogOptions): Logger {
  opsLog = createOpsLogger(options);
  return opsLog;
}
