import { join } from "node:path";
import { formatAuditFields, redactAudit, redactTrace } from "./format.js";
import { LineFile, type Warn } from "./line-file.js";
import { opsLog } from "./ops.js";
import type { CallRecorder } from "./records.js";

export const TRACE_FILE = "trace.jsonl";
export const AUDIT_FILE = "audit.log";

/** Receives one structured JSON line (no newline); HTTP mode passes stdout. */
export type StructuredSink = (line: string) => void;

export interface RecorderOptions {
  /** Directory of trace.jsonl and audit.log. */
  dir: string;
  /** Write the two files (default true). Cloud Run can switch them off: its disk is memory. */
  files?: boolean;
  /** Also emit every record as one Cloud Logging JSON line here (HTTP mode: stdout). */
  structured?: StructuredSink;
  /** Where a broken log file is reported, once per file. Default: the ops log (stderr). */
  warn?: Warn;
}

/** A CallRecorder that can be drained before the process exits. */
export interface Recorder extends CallRecorder {
  /** Waits for queued lines, then closes the files. */
  close(): Promise<void>;
}

const defaultWarn: Warn = (message, fields) => opsLog.warn(fields, message);

/**
 * The trace and audit logs. Every record is redacted once and then written to the files and/or
 * the structured sink. Trace lines are fire-and-forget and never synced (read paths stay fast);
 * audit lines are synced, and `audit()` resolves only once the line is on disk. Nothing here
 * throws or rejects: logging must never fail a replenishment order.
 */
export function createRecorder(options: RecorderOptions): Recorder {
  const warn = options.warn ?? defaultWarn;
  const filesOn = options.files !== false;
  const traceFile = filesOn ? new LineFile(join(options.dir, TRACE_FILE), warn) : undefined;
  const auditFile = filesOn ? new LineFile(join(options.dir, AUDIT_FILE), warn) : undefined;
  const emit = options.structured ? guardSink(options.structured, warn) : undefined;
  const warnOnce = onceEach(warn);

  return {
    trace(record, context) {
      try {
        const r = redactTrace(record);
        void traceFile?.append(JSON.stringify(r));
        emit?.({
          severity: r.status === "ok" ? "INFO" : "WARNING",
          message: `${r.tool} ${r.status}${r.error === null ? "" : ` (${r.error})`} in ${r.duration_ms} ms`,
          log_type: "trace",
          time: r.ts,
          ...r,
          ...context,
        });
      } catch (error) {
        warnOnce("trace", error);
      }
    },
    async audit(record, context) {
      try {
        const r = redactAudit(record);
        const line = formatAuditFields(r);
        emit?.({
          severity: "NOTICE",
          message: line,
          log_type: "audit",
          time: r.ts,
          ...r,
          ...context,
        });
        await auditFile?.append(line, { durable: true });
      } catch (error) {
        warnOnce("audit", error);
      }
    },
    async close() {
      await Promise.all([traceFile?.close(), auditFile?.close()]);
    },
  };
}

function guardSink(sink: StructuredSink, warn: Warn): (entry: Record<string, unknown>) => void {
  let warned = false;
  return (entry) => {
    try {
      sink(JSON.stringify(entry));
    } catch (error) {
      if (warned) return;
      warned = true;
      try {
        warn("cannot write structured log lines; they are being dropped", {
          code: (error as { code?: unknown } | null)?.code ?? "unknown",
        });
      } catch {}
    }
  };
}

/** A record that cannot even be formatted is reported once per kind, then dropped quietly. */
function onceEach(warn: Warn): (kind: "trace" | "audit", error: unknown) => void {
  const warned = new Set<string>();
  return (kind, error) => {
    if (warned.has(kind)) return;
    warned.add(kind);
    try {
      warn(`could not format a ${kind} record; it was dropped`, {
        error: error instanceof Error ? error.name : typeof error,
      });
    } catch {}
  };
}

/** stdout as a structured sink: one write per line. EPIPE and the like are reported, not thrown. */
export function stdoutSink(warn: Warn = defaultWarn): StructuredSink {
  let warned = false;
  process.stdout.on("error", (error: NodeJS.ErrnoException) => {
    if (warned) return;
    warned = true;
    warn("stdout is not writable; structured log lines are being dropped", {
      code: error.code ?? "unknown",
    });
  });
  return (line) => {
    process.stdout.write(`${line}\n`);
  };
}
