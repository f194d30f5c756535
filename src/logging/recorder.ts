import { join } from "node:path";
import {
  escapeLineTerminators,
  formatAuditFields,
  formatIntentFields,
  redactAudit,
  redactIntent,
  redactTrace,
} from "./format.js";
import { IntentJournal } from "./intents.js";
import { LineFile, type Warn } from "./line-file.js";
import { opsLog } from "./ops.js";
import type { AuditOutcome, AuditRecord, CallRecorder } from "./records.js";
import type { TraceFields } from "./trace-context.js";

export const TRACE_FILE = "trace.jsonl";
export const AUDIT_FILE = "audit.log";

/**
 * Receives one structured JSON line (no newline); HTTP mode passes stdout. `now`: the line must
 * be written before the call returns (audit lines); others may wait for the end of the current
 * event-loop turn, to be written together.
 */
export type StructuredSink = (line: string, now?: boolean) => void;

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
  /**
   * As CallRecorder's, resolving to whether the line is whole on disk now (false: the disk
   * refused it; it is retried, and the intent journal covers a kill meanwhile).
   */
  audit(record: AuditRecord, context?: TraceFields): Promise<boolean>;
  /**
   * Creates and locks the write-intent journal (before serving). Resolves to why it cannot
   * lock, or undefined (locked, or no files).
   */
  startJournal(): Promise<string | undefined>;
  /** The journal's path, once it exists. */
  journalPath(): string | undefined;
  /** Waits for queued lines, then closes the files. */
  close(): Promise<void>;
}

const defaultWarn: Warn = (message, fields) => opsLog.warn(fields, message);

/**
 * A trace line waits up to this long to share one write with the lines after it: each write is a
 * trip to the thread pool, and one per few lines took a read at 10 clients from 81-92 to 96-104 µs
 * of CPU (docs/performance.md). At a stop the waiting lines are written before the files close.
 */
const TRACE_BATCH_MS = 5;

/**
 * Audit outcomes of calls that never reached StoreLink's write: nothing to lose in a crash, so
 * their lines are not synced. Otherwise a caller could buy one fdatasync per refused call.
 */
const NOT_SYNCED: ReadonlySet<AuditOutcome> = new Set<AuditOutcome>(["REJECTED", "PREVIEW"]);

/**
 * The trace and audit logs. Every record is redacted once and then written to the files and/or
 * the structured sink. Trace lines are fire-and-forget and never synced (read paths stay fast);
 * audit lines of writes that reached StoreLink (CREATED, REPLAYED, UNCERTAIN) are synced, and
 * `audit()` resolves only once the line is on disk; REJECTED and PREVIEW lines are written but
 * not synced. Nothing here throws or rejects: logging must never fail a replenishment order.
 */
export function createRecorder(options: RecorderOptions): Recorder {
  const warn = options.warn ?? defaultWarn;
  const filesOn = options.files !== false;
  const traceFile = filesOn
    ? new LineFile(join(options.dir, TRACE_FILE), warn, { batchMs: TRACE_BATCH_MS })
    : undefined;
  // Audit lines the disk refuses wait and are written when it takes lines again.
  const auditFile = filesOn
    ? new LineFile(join(options.dir, AUDIT_FILE), warn, { retain: true })
    : undefined;
  const emit = options.structured ? guardSink(options.structured, warn) : undefined;
  const warnOnce = onceEach(warn);
  const journal = filesOn ? new IntentJournal(options.dir, warn) : undefined;

  return {
    trace(record, context) {
      try {
        const r = redactTrace(record);
        const json = escapeLineTerminators(JSON.stringify(r));
        void traceFile?.append(json);
        emit?.(
          {
            severity: r.status === "ok" ? "INFO" : "WARNING",
            message: `${r.tool} ${r.status}${r.error === null ? "" : ` (${r.error})`} in ${r.duration_ms} ms`,
            log_type: "trace",
            time: r.ts,
          },
          json,
          context,
        );
      } catch (error) {
        warnOnce("trace", error);
      }
    },
    async audit(record, context) {
      try {
        const r = redactAudit(record);
        const line = formatAuditFields(r);
        emit?.(
          { severity: "NOTICE", message: line, log_type: "audit", time: r.ts },
          escapeLineTerminators(JSON.stringify(r)),
          context,
          true,
        );
        if (!auditFile) return true;
        // The intent ends only once its line is whole on disk, now or when the disk takes it.
        return await auditFile.append(line, {
          durable: !NOT_SYNCED.has(r.outcome),
          written: () => journal?.end(record.request_id),
        });
      } catch (error) {
        warnOnce("audit", error);
        return false;
      }
    },
    intend(intent, context) {
      try {
        journal?.begin(intent);
        // Without files (Cloud Run, whose disk dies with the instance), the intent is a log entry
        // of its own: an INTENT without an audit entry of the same req is a write a kill cut off.
        if (emit && !journal) {
          const r = redactIntent(intent);
          emit(
            {
              severity: "NOTICE",
              message: `INTENT ${formatIntentFields(r)}`,
              log_type: "intent",
              time: new Date().toISOString(),
            },
            escapeLineTerminators(JSON.stringify(r)),
            context,
            true,
          );
        }
      } catch (error) {
        warnOnce("audit", error);
      }
    },
    async startJournal() {
      return journal?.start();
    },
    journalPath: () => journal?.path,
    async close() {
      await Promise.all([traceFile?.close(), auditFile?.close()]);
      journal?.close();
    },
  };
}

/**
 * The sink, fed one Cloud Logging entry: `head`'s fields, then the record's (already serialized,
 * with its line terminators escaped, so the record is not stringified or scanned twice), then the
 * request's trace fields.
 */
type Emit = (
  head: Record<string, unknown>,
  recordJson: string,
  context: object | undefined,
  now?: boolean,
) => void;

function guardSink(sink: StructuredSink, warn: Warn): Emit {
  let warned = false;
  return (head, recordJson, context, now) => {
    try {
      // The head quotes the record's text (an error message), so it is escaped too.
      const headJson = escapeLineTerminators(JSON.stringify(head));
      const contextJson = escapeLineTerminators(JSON.stringify(context ?? {}));
      sink(joinObjects([headJson, recordJson, contextJson]), now);
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

/** `{"a":1}` + `{"b":2}` → `{"a":1,"b":2}`, for serialized objects with distinct keys. */
function joinObjects(objects: string[]): string {
  const members = objects.map((json) => json.slice(1, -1)).filter((inner) => inner !== "");
  return `{${members.join(",")}}`;
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

/**
 * stdout as a structured sink. Lines of one event-loop turn go out in one write (under load that
 * is one system call for many requests, not one each); a line asked for `now` is written at
 * once, after any waiting ones, and so is whatever waits when the process exits. EPIPE and the
 * like are reported, not thrown.
 */
export function stdoutSink(warn: Warn = defaultWarn): StructuredSink {
  let warned = false;
  const report = (error: NodeJS.ErrnoException): void => {
    if (warned) return;
    warned = true;
    warn("stdout is not writable; structured log lines are being dropped", {
      code: error.code ?? "unknown",
    });
  };
  process.stdout.on("error", report);
  let waiting = "";
  const flush = (): void => {
    if (waiting === "") return;
    const text = waiting;
    waiting = "";
    try {
      process.stdout.write(text);
    } catch (error) {
      // Also called from setImmediate and on exit, where a throw would crash the process.
      report(error as NodeJS.ErrnoException);
    }
  };
  process.once("exit", flush);
  return (line, now) => {
    if (waiting === "" && !now) setImmediate(flush);
    waiting += `${line}\n`;
    if (now) flush();
  };
}
