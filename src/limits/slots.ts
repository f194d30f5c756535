/**
 * The slot book behind the hourly order cap: per bucket (a store and SKU), the slots of the last
 * hour, each named (by the write's idempotency key, or a fresh id) and in one of three states.
 * Every operation is one atomic step on one clock: the process's for the memory book, Redis's
 * `TIME` for the shared one (limits/redis.ts runs the same rules as a script).
 *
 * - `p` pending: taken before a write is sent. It counts while the write is in flight, and for
 *   an hour past the longest a write can take (PENDING_MS), so a slot whose holder died, or whose
 *   settle was lost, is over-counted rather than freed.
 * - `c` counted: StoreLink created the order (or replayed one this slot's key made).
 * - `u` uncertain: the outcome is unknown; it counts as an order.
 *
 * A name already in the book takes no second slot: the attempt joins the slot it has.
 */

export const HOUR_MS = 60 * 60_000;
/**
 * The longest a write holds a pending slot before it is sent and answered: the buyer's 5-minute
 * dialog, the key read and StoreLink's deadline, with room to spare.
 */
export const PENDING_MS = 15 * 60_000;

export type SlotState = "p" | "c" | "u";

/** What a bucket holds right now, by state. */
export interface SlotCounts {
  /** Orders StoreLink created this hour. */
  placed: number;
  /** Orders whose outcome is unknown: they may have landed. */
  uncertain: number;
  /** Writes still being submitted. */
  inFlight: number;
}

export type TakeResult =
  /** A new pending slot was taken for the name. */
  | ({ kind: "taken" } & SlotCounts)
  /** The name already holds a slot (a retry with the same key): nothing new was taken. */
  | ({ kind: "held" } & SlotCounts)
  /** The bucket is at the limit: nothing was taken. */
  | ({ kind: "full" } & SlotCounts);

/**
 * How a slot ends. `count` and `uncertain` write the slot even when it is gone (an over-count is
 * the safe side); `release` removes only a pending slot; `landed` turns an uncertain slot into
 * a counted one, keeping its hour.
 */
export type Settle = "count" | "uncertain" | "release" | "landed";

export interface SlotBook {
  /** Takes a pending slot named `name` if the bucket has room (`limit` slots an hour). */
  take(bucket: string, name: string, limit: number): Promise<TakeResult>;
  /** As `take`, without taking anything: whether `name` is held, or a new slot would be refused. */
  peek(bucket: string, name: string, limit: number): Promise<TakeResult>;
  settle(bucket: string, name: string, how: Settle): Promise<void>;
}

interface Slot {
  state: SlotState;
  /** When the slot stops counting, in ms on the book's clock. */
  until: number;
}

/** The per-process slot book: a map, on this process's clock. */
export class MemorySlotBook implements SlotBook {
  readonly #buckets = new Map<string, Map<string, Slot>>();

  constructor(private readonly now: () => number = Date.now) {}

  async take(bucket: string, name: string, limit: number): Promise<TakeResult> {
    return this.#decide(bucket, name, limit, true);
  }

  async peek(bucket: string, name: string, limit: number): Promise<TakeResult> {
    return this.#decide(bucket, name, limit, false);
  }

  async settle(bucket: string, name: string, how: Settle): Promise<void> {
    const now = this.now();
    const slots = this.#live(bucket, now);
    const slot = slots.get(name);
    if (how === "release") {
      if (slot?.state === "p") slots.delete(name);
    } else if (how === "landed") {
      if (slot?.state === "u") slot.state = "c";
    } else if (how === "count" || slot?.state !== "c") {
      slots.set(name, { state: how === "count" ? "c" : "u", until: now + HOUR_MS });
    }
    if (slots.size === 0) this.#buckets.delete(bucket);
    else this.#buckets.set(bucket, slots);
  }

  #decide(bucket: string, name: string, limit: number, take: boolean): TakeResult {
    const now = this.now();
    const slots = this.#live(bucket, now);
    const counts = countsOf(slots.values());
    if (slots.has(name)) return { kind: "held", ...counts };
    if (slots.size >= limit) return { kind: "full", ...counts };
    if (!take) return { kind: "taken", ...counts };
    slots.set(name, { state: "p", until: now + HOUR_MS + PENDING_MS });
    this.#buckets.set(bucket, slots);
    return { kind: "taken", ...counts };
  }

  /** The bucket's slots that still count, the others dropped. */
  #live(bucket: string, now: number): Map<string, Slot> {
    const slots = this.#buckets.get(bucket) ?? new Map<string, Slot>();
    for (const [name, slot] of slots) if (slot.until <= now) slots.delete(name);
    return slots;
  }
}

function countsOf(slots: Iterable<{ state: SlotState }>): SlotCounts {
  const counts: SlotCounts = { placed: 0, uncertain: 0, inFlight: 0 };
  for (const { state } of slots) {
    if (state === "c") counts.placed++;
    else if (state === "u") counts.uncertain++;
    else counts.inFlight++;
  }
  return counts;
}
