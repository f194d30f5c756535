import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { SENDING_MS } from "../limits/slots.js";
import { AuditTail } from "../logging/audit-read.js";
import { opsLog } from "../logging/ops.js";
import { AUDIT_FILE } from "../logging/recorder.js";
import type { CallRecorder, Resolution } from "../logging/records.js";
import { resolvedWrite } from "../policy/audit.js";
import { fenceKey, type KeyAsker, type KeyState, readKey } from "../policy/order-by-key.js";
import { type KeptAttempt, type OrderCap, RETRY_MAX_MS } from "../policy/order-cap.js";

/**
 * The reconciler: every write whose outcome is unknown is resolved to StoreLink's truth, by the
 * service, and gets exactly one RESOLVED audit line (docs/write-safety.md, "Reconciliation").
 *
 * - It never sends a create: it reads what StoreLink holds for the attempt's key, and fences the
 *   key only when StoreLink has no record of it, the attempt is past the grace (during which the
 *   agent's own same-key retry may still place the order the buyer approved), and no create with
 *   it is running.
 * - `CREATED` when StoreLink holds the key's order (the line names it); `NOT_CREATED` only once
 *   the key is fenced. The slot is settled with it: kept for an order, given back for none.
 * - Attempts live in the order cap's book, recorded with the slot: the fleet's on Redis (so an
 *   attempt whose replica died is resolved by another) or this process's own. A process without a
 *   limits store also reads audit.log for UNCERTAIN lines without a RESOLVED line (an earlier run,
 *   a killed one recovered from its journal).
 * - Each attempt is claimed for a lease before it is resolved, so two reconcilers never resolve
 *   one, and no line is written once the lease is over (a slow fence, a paused process); a line is
 *   written once per process even when the book cannot be settled afterwards.
 * - A process with log files reads audit.log's RESOLVED lines too, again once it holds the claim:
 *   an attempt whose line is there already (its resolver died before settling the book, or lost
 *   its claim with the limits store) is settled without a second line.
 * - The book is settled only once the RESOLVED line is on disk: a line a full disk refused waits in
 *   memory (logging/line-file.ts), and is settled when audit.log shows it; a process killed
 *   meanwhile leaves the attempt in the book for the next resolver.
 */

export interface ReconcilerOptions {
  graceMs: number;
  intervalMs: number;
  /** Where audit.log is, for a process without a limits store (undefined: no log files). */
  logDir?: string | undefined;
  /** How long an attempt still being sent is its writer's (default SENDING_MS; tests). */
  sendingMs?: number;
  /** How long a claim holds an attempt (default LEASE_MS; tests). */
  leaseMs?: number;
  /**
   * How long the limits store must have answered without a failure before an attempt still
   * marked as being sent is taken for a dead writer's (default WRITER_CATCH_UP_MS; tests).
   */
  catchUpMs?: number;
}

/** What one pass did. An attempt counts in the pass whose settle took it out of the book. */
export interface ReconcileReport {
  created: number;
  notCreated: number;
  /** Attempts left for a later pass (in their grace, in progress, StoreLink unreachable). */
  waiting: number;
  errors: number;
}

/**
 * The oldest attempt whose key is ever fenced: well inside StoreLink's 7-day retention of keys,
 * so "no record" can never mean "the record of an order has expired". Older ones need a person.
 */
export const FENCE_HORIZON_MS = 6 * 24 * 60 * 60_000;

/** How long a claim holds an attempt: longer than a read, a fence and a line take. */
const LEASE_MS = 2 * 60_000;

/**
 * A live writer's settle the limits store refused (an outage) lands within RETRY_MAX_MS of the
 * store answering again: until then, its attempt still marked as being sent may be one it
 * refused unsent, or answered, whatever its age.
 */
const WRITER_CATCH_UP_MS = RETRY_MAX_MS + 5_000;

const DETAIL: Record<Resolution, string> = {
  CREATED: "StoreLink holds an order for this attempt's idempotency key",
  NOT_CREATED:
    "StoreLink holds no order for this attempt's idempotency key, and the key is now fenced: it never can create one",
};

export class Reconciler {
  readonly #tail: AuditTail | undefined;
  /** Whether audit.log's unresolved UNCERTAIN lines are adopted (a process without a shared book). */
  readonly #adopts: boolean;
  /**
   * Attempts with a RESOLVED line whose book may not have been settled yet: written by this
   * process, or read in audit.log.
   */
  readonly #resolved = new Map<string, Resolution>();
  /**
   * Attempts of the book whose own CREATED or REPLAYED line audit.log holds: their writer saw the
   * order and died before settling the book. Kept only while they are in the book.
   */
  readonly #audited = new Set<string>();
  /** Attempts whose RESOLVED line this process wrote and the disk has not taken yet. */
  readonly #unwritten = new Set<string>();
  #running: Promise<ReconcileReport> | undefined;
  #timer: NodeJS.Timeout | undefined;
  #saidUnsupported = false;
  #bookDown = false;
  readonly #saidNeedsPerson = new Set<string>();

  constructor(
    private readonly deps: KeyAsker & { orderCap: OrderCap; recorder: CallRecorder },
    private readonly options: ReconcilerOptions,
  ) {
    this.#tail =
      options.logDir === undefined ? undefined : new AuditTail(join(options.logDir, AUDIT_FILE));
    this.#adopts = !deps.orderCap.shared;
  }

  /** Runs a pass now, and every `intervalMs` (never holding the process open). */
  start(): void {
    void this.#probe();
    void this.run();
    this.#timer = setInterval(() => void this.run(), this.options.intervalMs);
    this.#timer.unref();
  }

  /**
   * Says at start whether StoreLink answers contract 1.1's read by key: one read of a key nobody
   * ever sent, at the first store this server holds a key for (never a fence, never a create).
   */
  async #probe(): Promise<void> {
    try {
      for (const { store_id } of await this.deps.storelink.listStores()) {
        if (!(await this.deps.keys.getKey(store_id))) continue;
        const known = await readKey(this.deps, {
          store_id,
          sku: "-",
          quantity: 0,
          idempotency_key: `korral-probe-${randomUUID()}`,
        });
        if (known.state === "unsupported") this.#sayUnsupported();
        return;
      }
    } catch {
      // Unknown now: the first attempt to resolve finds out.
    }
  }

  /** Says once per attempt (and process) that an attempt cannot be resolved without a person. */
  #needsPerson(requestId: string, storeId: string, line: string): void {
    if (this.#saidNeedsPerson.has(requestId)) return;
    this.#saidNeedsPerson.add(requestId);
    opsLog.error({ request_id: requestId, store_id: storeId }, line);
  }

  #sayUnsupported(): void {
    if (this.#saidUnsupported) return;
    this.#saidUnsupported = true;
    opsLog.warn(
      {},
      "StoreLink lacks contract 1.1's order-request read or fence: writes of unknown outcome are resolved CREATED only when it can say so; the rest need a person (docs/storelink.md)",
    );
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  /** One pass; a pass already running is joined, not doubled. Never rejects. */
  run(): Promise<ReconcileReport> {
    this.#running ??= this.#pass()
      .catch((error: unknown): ReconcileReport => {
        opsLog.error({ err: error }, "the reconciler's pass failed; it runs again shortly");
        return { created: 0, notCreated: 0, waiting: 0, errors: 1 };
      })
      .finally(() => {
        this.#running = undefined;
      });
    return this.#running;
  }

  async #pass(): Promise<ReconcileReport> {
    const report: ReconcileReport = { created: 0, notCreated: 0, waiting: 0, errors: 0 };
    await this.#readAuditLog();
    let kept: KeptAttempt[];
    try {
      kept = await this.deps.orderCap.attempts();
      this.#bookDown = false;
    } catch {
      // Said once per outage (the limits store's own health line says the rest).
      if (!this.#bookDown) {
        opsLog.warn({}, "the reconciler cannot read the limits store; it runs again shortly");
      }
      this.#bookDown = true;
      report.errors++;
      return report;
    }
    const inBook = new Set(kept.map((k) => k.attempt.request_id));
    for (const id of this.#audited) if (!inBook.has(id)) this.#audited.delete(id);
    for (const attempt of kept) {
      const outcome = await this.#resolve(attempt);
      if (outcome === "CREATED") report.created++;
      else if (outcome === "NOT_CREATED") report.notCreated++;
      else if (outcome === "error") report.errors++;
      else if (outcome === "waiting") report.waiting++;
    }
    if (report.created + report.notCreated > 0) {
      opsLog.info({ reconcile: report }, "the reconciler resolved writes of unknown outcome");
    }
    return report;
  }

  /**
   * Notes the RESOLVED lines audit.log has gained, and adopts the UNCERTAIN lines no RESOLVED line
   * settles (local book only).
   */
  async #readAuditLog(): Promise<void> {
    if (this.#tail === undefined) return;
    const { uncertain, resolved, created } = await this.#tail.next();
    for (const { request_id, resolution } of resolved) {
      this.#resolved.set(request_id, resolution);
      this.#unwritten.delete(request_id);
    }
    for (const id of created) this.#audited.add(id);
    if (!this.#adopts) return;
    const now = Date.now();
    for (const line of uncertain) {
      if (this.#resolved.has(line.request_id)) continue;
      const sentAt = Date.parse(line.ts);
      this.deps.orderCap.adopt(line, Number.isNaN(sentAt) ? 0 : Math.max(0, now - sentAt));
    }
  }

  async #resolve(kept: KeptAttempt): Promise<Resolution | "waiting" | "skipped" | "error"> {
    const { attempt } = kept;
    if (this.#writersStill(kept)) return "skipped";
    const earlier = this.#lineOf(attempt.request_id);
    if (earlier !== undefined) {
      return this.#unwritten.has(attempt.request_id) ? "waiting" : this.#settle(kept, earlier);
    }
    // Reads are harmless; the attempt is claimed only before a fence or a line.
    let known: KeyState = await readKey(this.deps, attempt);
    const fence =
      known.state === "not_found" &&
      kept.age >= this.options.graceMs &&
      kept.age < FENCE_HORIZON_MS;
    if (known.state === "created" || known.state === "fenced" || fence) {
      const held = await this.#claimed(kept, fence);
      if (typeof held === "string") return held;
      known = held.fenced ?? known;
    }
    this.#sayWhatIsStuck(kept, known);
    if (known.state === "created") return this.#write(kept, "CREATED", known.order.order_id);
    if (known.state === "fenced") return this.#write(kept, "NOT_CREATED", null);
    return known.state === "unreachable" ? "error" : "waiting";
  }

  /**
   * Claims the attempt for its fence (when `fence`) and its line: the fence's answer if this
   * resolver goes on, else what the pass counts for the attempt.
   */
  async #claimed(
    kept: KeptAttempt,
    fence: boolean,
  ): Promise<{ fenced?: KeyState } | Resolution | "waiting" | "skipped" | "error"> {
    const leaseMs = this.options.leaseMs ?? LEASE_MS;
    // Before asking, so the time held is never undercounted (a monotonic clock: a pause counts).
    const asked = performance.now();
    try {
      if (!(await this.deps.orderCap.claim(kept, leaseMs))) return "skipped";
    } catch {
      return "error";
    }
    // Read since the pass began: a line the last holder of the claim wrote before it died.
    await this.#readAuditLog();
    const written = this.#lineOf(kept.attempt.request_id);
    if (written !== undefined) return this.#settle(kept, written);
    const fenced = fence ? await fenceKey(this.deps, kept.attempt) : undefined;
    // A claim held past its lease (a slow fence, a paused process) may be another resolver's by
    // now: the line is left to whoever holds the attempt next.
    if (performance.now() - asked >= leaseMs) return "waiting";
    return { fenced };
  }

  /** Says, once, why an attempt StoreLink cannot settle waits for a person. */
  #sayWhatIsStuck({ attempt, age }: KeptAttempt, known: KeyState): void {
    if (known.state === "unsupported") this.#sayUnsupported();
    if (known.state === "mismatch") {
      this.#needsPerson(
        attempt.request_id,
        attempt.store_id,
        "StoreLink holds an order for another SKU or quantity under this write's idempotency key: it needs a person",
      );
    } else if (known.state === "not_found" && age >= FENCE_HORIZON_MS) {
      this.#needsPerson(
        attempt.request_id,
        attempt.store_id,
        "StoreLink has no record of this write's idempotency key, and the write is too old to fence safely (StoreLink may have dropped the record of its order): it needs a person",
      );
    }
  }

  /** The attempt's RESOLVED line, then its settle once the line is on disk. */
  async #write(
    kept: KeptAttempt,
    resolution: Resolution,
    orderId: string | null,
  ): Promise<Resolution | "waiting" | "skipped" | "error"> {
    const { attempt } = kept;
    const onDisk = await this.deps.recorder.audit(
      resolvedWrite(attempt, resolution, orderId, DETAIL[resolution]),
    );
    this.#resolved.set(attempt.request_id, resolution);
    if (onDisk === false) {
      this.#unwritten.add(attempt.request_id);
      return "waiting";
    }
    return this.#settle(kept, resolution);
  }

  /** What audit.log already says of the attempt: its RESOLVED line, or its writer's CREATED one. */
  #lineOf(requestId: string): Resolution | undefined {
    return this.#resolved.get(requestId) ?? (this.#audited.has(requestId) ? "CREATED" : undefined);
  }

  /**
   * A write still being sent is its writer's until it must be over (or its writer is dead), and
   * while its writer may still be retrying a settle the limits store refused.
   */
  #writersStill(kept: KeptAttempt): boolean {
    if (kept.state !== "sending") return false;
    return (
      kept.age < (this.options.sendingMs ?? SENDING_MS) ||
      this.deps.orderCap.quietForMs < (this.options.catchUpMs ?? WRITER_CATCH_UP_MS)
    );
  }

  /**
   * Settles the slot and drops the attempt; if the book cannot be written, the next pass settles
   * it without a second line. An attempt another resolver settled first is theirs to count.
   */
  async #settle(
    kept: KeptAttempt,
    resolution: Resolution,
  ): Promise<Resolution | "skipped" | "error"> {
    try {
      return (await this.deps.orderCap.resolve(kept, resolution)) ? resolution : "skipped";
    } catch {
      return "error";
    }
  }
}
