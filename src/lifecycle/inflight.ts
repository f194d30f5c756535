import type { AuditRecord, CallRecorder, TraceRecord } from "../logging/records.js";
import type { TraceFields } from "../logging/trace-context.js";
import { abandonedWrite, orderFieldsOf } from "../policy/audit.js";

/**
 * One running tool call. It is the call's recorder too, so it knows whether the call has already
 * written its audit line: a write abandoned at shutdown must leave exactly one line, never an
 * UNCERTAIN next to its own CREATED.
 */
export class InflightCall implements CallRecorder {
  #audited = false;
  #sent = false;
  constructor(
    readonly requestId: string,
    readonly tool: string,
    /** A write (create_replenishment_order): audited UNCERTAIN if abandoned. */
    readonly write: boolean,
    readonly args: unknown,
    readonly recorder: CallRecorder,
    readonly traceFields: TraceFields,
    /** The call's start, as its own trace line records it (ISO time, performance.now()). */
    readonly ts: string,
    readonly started: number,
  ) {}

  trace(record: TraceRecord, context?: TraceFields): void {
    this.recorder.trace(record, context);
  }

  audit(record: AuditRecord, context?: TraceFields): Promise<boolean | void> {
    this.#audited = true;
    return this.recorder.audit(record, context);
  }

  /** The write is being handed to StoreLink: from now on, abandoning it leaves it uncertain. */
  markSent(): void {
    this.#sent = true;
    this.recorder.intend?.(this.requestId, orderFieldsOf(this.args), this.traceFields);
  }

  /**
   * Traces the abandoned call (it never returns to trace itself) and audits an abandoned write,
   * unless it has already written its audit line: UNCERTAIN once it was sent, else REJECTED.
   * A closed recorder writes (and syncs) the lines before this returns. Tells whether an audit
   * line was written.
   */
  abandon(): boolean {
    const fields = orderFieldsOf(this.args);
    this.recorder.trace(
      {
        ts: this.ts,
        request_id: this.requestId,
        tool: this.tool,
        store_id: fields.store_id,
        status: "error",
        error: !this.write
          ? "internal: stopped by shutdown"
          : this.#sent
            ? "outcome_unknown: stopped by shutdown"
            : "internal: stopped by shutdown before the order was sent",
        duration_ms: Math.round((performance.now() - this.started) * 100) / 100,
        args: this.args ?? {},
      },
      this.traceFields,
    );
    if (!this.write || this.#audited) return false;
    void this.audit(abandonedWrite(fields, this.requestId, this.#sent), this.traceFields);
    return true;
  }
}

/**
 * The tool calls of this process that have not returned yet, so that a stop (SIGTERM, the end of
 * stdin) can wait for them, and audit the writes among them that outlive the grace period.
 */
export class InflightCalls {
  readonly #calls = new Set<InflightCall>();
  #idle: (() => void)[] = [];

  get size(): number {
    return this.#calls.size;
  }

  begin(call: InflightCall): void {
    this.#calls.add(call);
  }

  end(call: InflightCall): void {
    this.#calls.delete(call);
    if (this.#calls.size === 0 && this.#idle.length > 0) {
      for (const resolve of this.#idle.splice(0)) resolve();
    }
  }

  /** Resolves once no call is running (at once if none is). */
  whenIdle(): Promise<void> {
    if (this.#calls.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  /**
   * Audits every running write (UNCERTAIN, or REJECTED if not yet sent). Call it last before
   * exiting: after the recorder is closed, its lines are written (and synced) before this
   * returns, and no later answer can run. Returns how many writes were abandoned.
   */
  abandonAll(): number {
    let writes = 0;
    for (const call of this.#calls) if (call.abandon()) writes++;
    this.#calls.clear();
    return writes;
  }
}

/** The process's running tool calls (callTool registers every call here). */
export const inflightCalls = new InflightCalls();
