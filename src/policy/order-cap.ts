import { randomBytes } from "node:crypto";
import { ToolError } from "../errors.js";
import type { LimitsHealth } from "../limits/health.js";
import {
  type AttemptState,
  HOUR_MS,
  MemorySlotBook,
  PENDING_MS,
  type Settle,
  type SlotBook,
  type SlotCounts,
} from "../limits/slots.js";
import type { IntentRecord, Resolution } from "../logging/records.js";
import type { Sku, Store } from "../storelink/client.js";

/**
 * The loop guard: at most `perHour` orders for the same store and SKU in a rolling hour, counted
 * in a slot book (limits/slots.ts): this process's own, or the fleet's on Redis. It stops a
 * looping agent; StoreLink's dedupe stops duplicate trucks.
 *
 * - Every create holds a slot before it is sent; a slot is named by the write's idempotency key
 *   (the agent's, or one this server made), so a retry with the same key joins the slot its
 *   first attempt holds (pending or counted) and never takes a second: a retry is never refused
 *   by the cap.
 * - The same step records the attempt (what the reconciler needs to resolve it), which stays in
 *   the book until StoreLink answered, nothing was sent, or the reconciler resolved it. With
 *   `perHour` 0 nothing is refused, but slots and attempts are still kept.
 * - Every attempt holds under a token of its own. The slot counts when StoreLink created the
 *   order or the outcome is unknown; an attempt gives its hold back when nothing was sent or
 *   StoreLink replayed an order older than the slot, and the slot goes once no attempt holds it.
 * - When the book cannot be read (a shared store down, slow or answering garbage), no write is
 *   sent: `limitsUnavailable`, retryable. The take may still have run (an answer past the
 *   deadline, or lost with its connection), so its release follows it at once on the same
 *   connection, and again until the store answers: a write refused unsent never keeps a slot
 *   once the store answers again, and the release frees only what this attempt's take held.
 * - A `count` or `uncertain` that fails leaves the slot pending, which still counts (an
 *   over-count is the safe side); a release that fails is retried until the store answers.
 */

export interface OrderCapOptions {
  /** 0 turns the guard off. */
  perHour: number;
  /** The per-process book's clock (tests); ignored with `shared`. */
  now?: () => number;
  /** The fleet's book (limits/redis.ts); this process's own when absent. */
  shared?: SharedBook | undefined;
}

/** A slot book on a shared store, with its health and a describer of its errors. */
export interface SharedBook {
  slots: SlotBook;
  /** Told of every failed and answered call. */
  health: LimitsHealth;
  /** A failure of the store for the ops log, without its secrets. */
  describe(error: unknown): string;
}

/** A write being sent, as the book keeps it until its outcome is known. */
export interface Attempt extends IntentRecord {
  store_id: string;
  sku: string;
  quantity: number;
  reason: string;
  idempotency_key: string;
}

/** An attempt the book keeps, with where it stands. */
export interface KeptAttempt {
  attempt: Attempt;
  state: AttemptState;
  /** Milliseconds in that state, on the book's clock. */
  age: number;
  /** The parts the book needs to settle it. */
  bucket: string;
  holder: string;
}

/** A slot held by a write. Exactly one of the two settles is called; neither ever throws. */
export interface Reservation {
  /** The key already held a slot: an earlier attempt with the same key (a retry). */
  readonly joined: boolean;
  /** StoreLink answered: `replayed` says whether it folded this write into an earlier order. */
  answered(replayed: boolean): Promise<void>;
  /** The write failed: `mayHaveLanded` says whether the order may exist all the same. */
  failed(mayHaveLanded: boolean): Promise<void>;
}

export class OrderCap {
  readonly perHour: number;
  readonly #slots: SlotBook;
  readonly #health: LimitsHealth | undefined;
  readonly #describe: (error: unknown) => string;
  /** Releases waiting for the store to answer again. */
  #retrying = 0;

  constructor(options: OrderCapOptions) {
    this.perHour = options.perHour;
    this.#slots = options.shared?.slots ?? new MemorySlotBook(options.now);
    this.#health = options.shared?.health;
    this.#describe = options.shared?.describe ?? String;
  }

  /**
   * Holds a slot for the write (joining the one its idempotency key holds), or throws the cap's
   * refusal; throws `limitsUnavailable` when the book cannot be read.
   */
  async hold(store: Store, item: Sku, attempt: Attempt): Promise<Reservation> {
    const bucket = bucketOf(store, item);
    const name = slotName(attempt.idempotency_key);
    const holder = randomBytes(9).toString("base64url");
    const id = attempt.request_id;
    const settle = (how: Settle): Promise<void> => this.#settle(bucket, name, how, holder, id);
    const record = JSON.stringify({ ...attempt, holder });
    const limit = this.perHour > 0 ? this.perHour : Number.MAX_SAFE_INTEGER;
    const taken = await this.#ask(
      () => this.#slots.take(bucket, name, limit, holder, { id, record }),
      // Refused unsent, whatever the take did on the store. Not a health report: the take's
      // failure was one, and a release can pass where a take cannot (a full store).
      () => this.#retry(bucket, name, "release", holder, true, id),
    );
    if (taken.kind === "full") throw capReached(store, item, this.perHour, taken);
    const joined = taken.kind === "held";
    return {
      joined,
      // A joiner's replay proves the slot's order landed; a holder's means it is older.
      answered: (replayed) => settle(replayed ? (joined ? "landed" : "release") : "count"),
      // A joiner gives back only its own hold: the slot stays while its first attempt holds it.
      failed: (mayHaveLanded) => settle(mayHaveLanded ? "uncertain" : "release"),
    };
  }

  /**
   * For a preview and round 1: throws the cap's refusal if this order would be refused now (a
   * key that holds a slot never is); holds nothing.
   */
  async refuseIfFull(store: Store, item: Sku, idempotencyKey: string | undefined): Promise<void> {
    if (this.perHour <= 0) return;
    // A key-less order names no slot yet: only the count can refuse it.
    const name = idempotencyKey === undefined ? "" : slotName(idempotencyKey);
    const peeked = await this.#ask(() =>
      this.#slots.peek(bucketOf(store, item), name, this.perHour),
    );
    if (peeked.kind === "full") throw capReached(store, item, this.perHour, peeked);
  }

  async #ask<T>(decide: () => Promise<T>, onFailure?: () => void): Promise<T> {
    try {
      const answer = await decide();
      this.#health?.answered();
      return answer;
    } catch (error) {
      this.#health?.failed(this.#describe(error));
      onFailure?.();
      throw limitsUnavailable();
    }
  }

  /**
   * The attempts kept in the book, oldest first, read from the book's own records: an attempt
   * whose record cannot be read is left where it is (a person reads the book).
   */
  async attempts(): Promise<KeptAttempt[]> {
    const { now, entries } = await this.#slots.attempts();
    const kept: KeptAttempt[] = [];
    for (const entry of entries) {
      const parsed = attemptOf(entry.record);
      if (parsed === undefined) continue;
      kept.push({
        attempt: parsed.attempt,
        state: entry.state,
        age: now - entry.since,
        bucket: entry.bucket,
        holder: parsed.holder,
      });
    }
    return kept.sort((a, b) => b.age - a.age);
  }

  /** Holds a kept attempt for `leaseMs` so no other reconciler resolves it meanwhile. */
  async claim(kept: KeptAttempt, leaseMs: number): Promise<boolean> {
    return (await this.#slots.claim(kept.bucket, kept.attempt.request_id, leaseMs)) !== undefined;
  }

  /**
   * Settles a resolved attempt: an order found keeps the slot counted (in its hour), a fenced key
   * gives it back; the attempt leaves the book. False when it had already left it (another
   * resolver settled it first: nothing changed). Throws when the book cannot be written (the
   * attempt stays, claimed until its lease ends).
   */
  resolve(kept: KeptAttempt, resolution: Resolution): Promise<boolean> {
    return this.#slots.settle(
      kept.bucket,
      slotName(kept.attempt.idempotency_key),
      resolution === "CREATED" ? "confirmed" : "void",
      kept.holder,
      kept.attempt.request_id,
    );
  }

  /** An attempt read back from audit.log (an UNCERTAIN line), kept in this process's own book. */
  adopt(attempt: Attempt, age: number): void {
    if (!(this.#slots instanceof MemorySlotBook)) return;
    const bucket = `${attempt.store_id}:${attempt.sku}`;
    const record = JSON.stringify({ ...attempt, holder: "" });
    this.#slots.adopt(bucket, { id: attempt.request_id, record }, "uncertain", Date.now() - age);
  }

  /** Whether the attempts live in a shared store (the fleet's) rather than in this process. */
  get shared(): boolean {
    return this.#health !== undefined;
  }

  /**
   * How long the book has answered this process without a failure (Infinity for the process's
   * own book): a writer whose settle the book refused retries it at least every RETRY_MAX_MS.
   */
  get quietForMs(): number {
    return this.#health?.quietForMs ?? Number.POSITIVE_INFINITY;
  }

  async #settle(
    bucket: string,
    name: string,
    how: Settle,
    holder: string,
    attemptId: string,
  ): Promise<void> {
    try {
      await this.#slots.settle(bucket, name, how, holder, attemptId);
      this.#health?.answered();
    } catch (error) {
      // The slot stays as it was (pending counts): never a failure of the write itself.
      this.#health?.failed(this.#describe(error));
      if (how === "release" || how === "landed" || how === "count") {
        this.#retry(bucket, name, how, holder, false, attemptId);
      }
    }
  }

  /**
   * Sends a release (or `landed`) until the store takes it (`now`: the first at once), backing
   * off to a try every RETRY_MAX_MS, for as long as the slot could live; at most MAX_RETRIES at
   * once (past that the slot just runs out its time: the safe side). Both are idempotent per
   * holder. Silent: the call that failed has told the health already.
   */
  #retry(
    bucket: string,
    name: string,
    how: Settle,
    holder: string,
    now: boolean,
    attemptId: string,
  ): void {
    if (this.#retrying >= MAX_RETRIES) return;
    this.#retrying++;
    const giveUpAt = Date.now() + HOUR_MS + PENDING_MS;
    const send = async (n: number): Promise<void> => {
      try {
        await this.#slots.settle(bucket, name, how, holder, attemptId);
        this.#retrying--;
      } catch {
        if (Date.now() < giveUpAt) later(n + 1);
        else this.#retrying--;
      }
    };
    const later = (n: number): void => {
      // A retry never holds the process open: at exit, the slot runs out its time instead.
      setTimeout(() => void send(n), Math.min(RETRY_FIRST_MS * 2 ** n, RETRY_MAX_MS)).unref();
    };
    if (now) void send(0);
    else later(0);
  }
}

const RETRY_FIRST_MS = 250;
/** The longest a writer waits between two tries of a settle the book refused. */
export const RETRY_MAX_MS = 15_000;
const MAX_RETRIES = 10_000;

const bucketOf = (store: Store, item: Sku): string => `${store.store_id}:${item.sku}`;

/** The slot a write's idempotency key names. */
const slotName = (idempotencyKey: string): string => `key:${idempotencyKey}`;

const text = (value: unknown): value is string => typeof value === "string";

/** An attempt's record as the book keeps it, checked field by field; undefined if it is not one. */
function attemptOf(record: string): { attempt: Attempt; holder: string } | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(record);
  } catch {
    return undefined;
  }
  if (parsed === null || typeof parsed !== "object") return undefined;
  const { holder, ...rest } = parsed as Record<string, unknown>;
  const a = rest as Partial<Record<keyof Attempt, unknown>>;
  const ok =
    text(holder) &&
    text(a.request_id) &&
    text(a.by) &&
    (a.client === undefined || text(a.client)) &&
    text(a.ts) &&
    text(a.store_id) &&
    text(a.sku) &&
    typeof a.quantity === "number" &&
    text(a.reason) &&
    text(a.idempotency_key);
  return ok ? { attempt: rest as unknown as Attempt, holder: holder as string } : undefined;
}

/** The refusal the model reads at the cap: what was counted, and who can place a real volume. */
export function capReached(
  store: Store,
  item: Sku,
  limit: number,
  { placed, uncertain, inFlight }: SlotCounts,
): ToolError {
  const more = [
    inFlight > 0
      ? `${inFlight} more ${inFlight === 1 ? "is" : "are"} being submitted now`
      : undefined,
    uncertain > 0
      ? `${uncertain} ${uncertain === 1 ? "has" : "have"} an unknown outcome and may have landed`
      : undefined,
  ].filter((part) => part !== undefined);
  const counted = `${placed} ${placed === 1 ? "was" : "were"} placed in the last hour${more.map((part) => `, and ${part}`).join("")}`;
  // "Nothing was submitted" is said only where it is true of every order counted.
  const sent =
    uncertain > 0
      ? "This request was not sent to StoreLink. To learn whether an earlier order landed, resend it with its own idempotency_key (a retry is never refused here) or check it with get_replenishment_status."
      : "Nothing was submitted.";
  return new ToolError(
    "order_cap_reached",
    `Order limit reached: this server allows ${limit} orders an hour for ${item.name} ` +
      `(SKU ${item.sku}) at ${store.name} (store ${store.store_id}); ${counted}. ${sent} ` +
      "If the volume is real, contact Korral ops to place it.",
    "Do not retry with a new idempotency_key. Tell the buyer the hourly limit was reached and " +
      "that Korral ops can place the order if the volume is real; check the earlier orders with " +
      "get_replenishment_status.",
    false,
  );
}

/** The shared order limits could not be checked: nothing is sent, and a retry may succeed. */
export function limitsUnavailable(): ToolError {
  return new ToolError(
    "limits_unavailable",
    "The order limits could not be checked (the service's limits store did not answer), so " +
      "nothing was submitted.",
    "Retry in a minute with the same arguments and idempotency_key; if it keeps failing, tell " +
      "the buyer that ordering is paused and Korral IT is looking into it. Reads still work.",
    true,
  );
}
