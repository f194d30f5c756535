import { randomBytes, randomUUID } from "node:crypto";
import { ToolError } from "../errors.js";
import type { LimitsHealth } from "../limits/health.js";
import {
  HOUR_MS,
  MemorySlotBook,
  PENDING_MS,
  type Settle,
  type SlotBook,
  type SlotCounts,
} from "../limits/slots.js";
import type { Sku, Store } from "../storelink/client.js";

/**
 * The loop guard: at most `perHour` orders for the same store and SKU in a rolling hour, counted
 * in a slot book (limits/slots.ts): this process's own, or the fleet's on Redis. It stops a
 * looping agent; StoreLink's dedupe stops duplicate trucks.
 *
 * - Every create holds a slot before it is sent; a slot is named by the write's idempotency key,
 *   so a retry with the same key joins the slot its first attempt holds (pending or counted)
 *   and goes to StoreLink, which folds it: a retry is never refused by the cap.
 * - A key-less create takes a slot of its own: it cannot be told apart from a new order.
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

/** A slot held by a write. Exactly one of the two is called; neither ever throws. */
export interface Reservation {
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
  async hold(store: Store, item: Sku, idempotencyKey: string | undefined): Promise<Reservation> {
    if (this.perHour <= 0) return NO_OP;
    const bucket = bucketOf(store, item);
    const name = slotName(idempotencyKey) ?? `once:${randomUUID()}`;
    const holder = randomBytes(9).toString("base64url");
    const settle = (how: Settle): Promise<void> => this.#settle(bucket, name, how, holder);
    const taken = await this.#ask(
      () => this.#slots.take(bucket, name, this.perHour, holder),
      // Refused unsent, whatever the take did on the store. Not a health report: the take's
      // failure was one, and a release can pass where a take cannot (a full store).
      () => this.#retry(bucket, name, "release", holder, true),
    );
    if (taken.kind === "full") throw capReached(store, item, this.perHour, taken);
    const joined = taken.kind === "held";
    return {
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
    // A key-less order names no slot: only the count can refuse it.
    const name = slotName(idempotencyKey) ?? "";
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

  async #settle(bucket: string, name: string, how: Settle, holder: string): Promise<void> {
    try {
      await this.#slots.settle(bucket, name, how, holder);
      this.#health?.answered();
    } catch (error) {
      // The slot stays as it was (pending counts): never a failure of the write itself.
      this.#health?.failed(this.#describe(error));
      if (how === "release" || how === "landed") this.#retry(bucket, name, how, holder);
    }
  }

  /**
   * Sends a release (or `landed`) until the store takes it (`now`: the first at once), backing
   * off to a try every RETRY_MAX_MS, for as long as the slot could live; at most MAX_RETRIES at
   * once (past that the slot just runs out its time: the safe side). Both are idempotent per
   * holder. Silent: the call that failed has told the health already.
   */
  #retry(bucket: string, name: string, how: Settle, holder: string, now = false): void {
    if (this.#retrying >= MAX_RETRIES) return;
    this.#retrying++;
    const giveUpAt = Date.now() + HOUR_MS + PENDING_MS;
    const send = async (n: number): Promise<void> => {
      try {
        await this.#slots.settle(bucket, name, how, holder);
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
const RETRY_MAX_MS = 15_000;
const MAX_RETRIES = 10_000;

const bucketOf = (store: Store, item: Sku): string => `${store.store_id}:${item.sku}`;

/** The slot a write's idempotency key names; a key-less write names none. */
const slotName = (idempotencyKey: string | undefined): string | undefined =>
  idempotencyKey === undefined ? undefined : `key:${idempotencyKey}`;

const NO_OP: Reservation = {
  answered: () => Promise.resolve(),
  failed: () => Promise.resolve(),
};

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
