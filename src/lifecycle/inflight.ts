import { type CallRecord, traceOf } from "../logging/call-record.js";
import type {
  AuditRecord,
  CallRecorder,
  IntentRecord,
  SentOrder,
  TraceRecord,
} from "../logging/records.js";
import type { TraceFields } from "../logging/trace-context.js";
import { abandonedWrite, intentOf, orderFieldsOf } from "../policy/audit.js";

/**
 * One running tool call. It is the call's recorder too, so it knows whether the call has already
 * written its audit line: a write abandoned at shutdown must leave exactly one line, never an
 * UNCERTAIN next to its own CREATED.
 */
export class InflightCall implements CallRecorder {
  /** Its neighbours in the registry's list while it runs (only InflightCalls touches these). */
  listPrev: InflightCall | undefined;
  listNext: InflightCall | undefined;
  #audited = false;
  #lastAudit: AuditRecord | undefined;
  /** The order as handed to StoreLink, once it was. */
  #sent: SentOrder | undefined;
  constructor(
    readonly call: CallRecord,
    /** A write (create_replenishment_order): audited UNCERTAIN if abandoned. */
    readonly write: boolean,
    readonly recorder: CallRecorder,
  ) {}

  trace(record: TraceRecord, context?: TraceFields): void {
    this.recorder.trace(record, context);
  }

  /** The call's audit line, once it has written it (its outcome and key join its span). */
  get auditLine(): AuditRecord | undefined {
    return this.#lastAudit;
  }

  audit(record: AuditRecord, context?: TraceFields): Promise<boolean | undefined> {
    this.#audited = true;
    this.#lastAudit = record;
    return this.recorder.audit(record, context);
  }

  intend(intent: IntentRecord, context?: TraceFields): void {
    this.recorder.intend(intent, context);
  }

  /** The write is being handed to StoreLink: from now on, abandoning it leaves it uncertain. */
  markSent(order: SentOrder): void {
    this.#sent = order;
    this.intend(intentOf(this.call, order), this.call.traceFields);
  }

  /**
   * Traces the abandoned call (it never returns to trace itself) and audits an abandoned write,
   * unless it has already written its audit line: UNCERTAIN once it was sent, else REJECTED.
   * A closed recorder writes (and syncs) the lines before this returns. Tells whether an audit
   * line was written.
   */
  abandon(): boolean {
    const fields = this.#sent ?? orderFieldsOf(this.call.args);
    this.recorder.trace(
      traceOf(this.call, {
        store_id: fields.store_id,
        status: "error",
        error: !this.write
          ? "internal: stopped by shutdown"
          : this.#sent
            ? "outcome_unknown: stopped by shutdown"
            : "internal: stopped by shutdown before the order was sent",
      }),
      this.call.traceFields,
    );
    if (!this.write || this.#audited) return false;
    void this.audit(
      abandonedWrite(this.call, fields, this.#sent !== undefined),
      this.call.traceFields,
    );
    return true;
  }
}

/**
 * The tool calls of this process that have not returned yet, so that a stop (SIGTERM, the end of
 * stdin) can wait for them, and audit the writes among them that outlive the grace period.
 *
 * A list through the calls themselves, not a Set: a Set's table is rebuilt each time it grows or
 * shrinks, and under load the running calls go from none to dozens and back on every turn of the
 * event loop. Measured, nearly every read was promoted to V8's old generation with the Set (2.9
 * KB a read, a full collection every 200 ms under load) and none without it: a rebuilt table that
 * had reached the old generation went on pointing at the calls it held, and through them at each
 * request and its answer (docs/performance.md). Unlinking a call clears its own links, so a
 * finished call refers to no other. Oldest first, as the calls began.
 */
export class InflightCalls {
  #head: InflightCall | undefined;
  #tail: InflightCall | undefined;
  #size = 0;
  #idle: (() => void)[] = [];

  get size(): number {
    return this.#size;
  }

  begin(call: InflightCall): void {
    if (this.#holds(call)) return;
    call.listPrev = this.#tail;
    if (this.#tail === undefined) this.#head = call;
    else this.#tail.listNext = call;
    this.#tail = call;
    this.#size++;
  }

  end(call: InflightCall): void {
    if (this.#holds(call)) this.#unlink(call);
    if (this.#size === 0 && this.#idle.length > 0) {
      for (const resolve of this.#idle.splice(0)) resolve();
    }
  }

  /** Resolves once no call is running (at once if none is). */
  whenIdle(): Promise<void> {
    if (this.#size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  /**
   * Audits every running write (UNCERTAIN, or REJECTED if not yet sent). Call it last before
   * exiting: after the recorder is closed, its lines are written (and synced) before this
   * returns, and no later answer can run. Returns how many writes were abandoned.
   */
  abandonAll(): number {
    let writes = 0;
    while (this.#head !== undefined) {
      const call = this.#head;
      this.#unlink(call);
      if (call.abandon()) writes++;
    }
    return writes;
  }

  #unlink(call: InflightCall): void {
    const { listPrev: prev, listNext: next } = call;
    if (prev === undefined) this.#head = next;
    else prev.listNext = next;
    if (next === undefined) this.#tail = prev;
    else next.listPrev = prev;
    call.listPrev = undefined;
    call.listNext = undefined;
    this.#size--;
  }

  /** Whether `call` is in the list: only the oldest call has no call before it. */
  #holds(call: InflightCall): boolean {
    return call.listPrev !== undefined || this.#head === call;
  }
}

/** The process's running tool calls (callTool registers every call here). */
export const inflightCalls = new InflightCalls();
