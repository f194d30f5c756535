/**
 * The slot book behind the hourly order cap: per bucket (a store and SKU), the slots of the last
 * hour, each named (by the write's idempotency key, or a fresh id) and in one of three states.
 * Every operation is one atomic step on one clock: the process's for the memory book, Redis's
 * `TIME` for the shared one (limits/redis.ts runs the same rules as a script).
 *
 * - `p` pending: taken before a write is sent. It counts while the write is in flight, and for
 *   an hour past the longest a write can take (PENDING_MS), so a slot whose holder died, or whose
 *   settle was lost, is over-counted rather than freed. Past SENDING_MS it is told as an unknown
 *   outcome, not as a write being submitted.
 * - `c` counted: StoreLink created the order (or replayed one this slot's key made).
 * - `u` uncertain: the outcome is unknown; it counts as an order.
 *
 * A name already in the book takes no second slot: the attempt joins the slot it has. A pending
 * slot lists its holders (each attempt's own token, at most MAX_HOLDERS, then `*` for "more,
 * untracked"): a release frees it only once every holder has let go, so one attempt's release
 * never frees a slot another attempt is sending under, and a take whose answer was lost can be
 * undone by its token (the take either ran, and the token is there, or it did not).
 *
 * Beside the slots, the book keeps each write's **attempt** (an opaque record, by request id)
 * from the take that sends it (the same atomic step) until its outcome is known: `sending`, then
 * gone when StoreLink answered or nothing was sent, or `uncertain`. The reconciler lists them,
 * claims one at a time (a lease: each is resolved once across the fleet) and settles it with
 * `confirmed` or `void`, which remove it.
 */

export const HOUR_MS = 60 * 60_000;
/**
 * The longest a write holds a pending slot before it is sent and answered: the buyer's 5-minute
 * dialog, the key read and StoreLink's deadline, with room to spare.
 */
export const PENDING_MS = 15 * 60_000;
/**
 * The longest a write takes from its slot to StoreLink's answer: the key read and StoreLink's
 * deadline, twice (a 401 reloads the key and sends again), at their largest settings.
 */
export const SENDING_MS = 5 * 60_000;
/** Holders a pending slot names; more turn it into one no release frees (the safe side). */
export const MAX_HOLDERS = 8;
/** The holder that stands for those past MAX_HOLDERS. */
export const UNTRACKED = "*";

export type SlotState = "p" | "c" | "u";

/** What a bucket holds right now, by state. */
export interface SlotCounts {
  /** Orders StoreLink created this hour. */
  placed: number;
  /** Orders whose outcome is unknown (pending slots past SENDING_MS too): they may have landed. */
  uncertain: number;
  /** Writes still being submitted: pending slots younger than SENDING_MS. */
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
 * How an attempt ends its hold. `count` and `uncertain` write the slot even when it is gone (an
 * over-count is the safe side); `release` takes the holder off a pending slot, which goes once no
 * holder is left; `landed` turns an uncertain slot into a counted one, keeping its hour, and on a
 * pending slot is a `release`.
 */
export type Settle = "count" | "uncertain" | "release" | "landed" | "confirmed" | "void";

/**
 * `confirmed`: the reconciler found the order: the slot counts (keeping its hour; a slot gone is
 * counted anew). `void`: the key is fenced, no order exists: an uncertain slot goes, a pending one
 * loses the attempt's hold. Every settle but `uncertain` removes the attempt; `uncertain` marks it.
 * A reconciler's settle (`confirmed`, `void`) of an attempt no longer in the book changes nothing:
 * another resolver settled it first.
 */

/** A reconciler's settle: it names an attempt the book must still hold. */
const isResolution = (how: Settle): boolean => how === "confirmed" || how === "void";

/** How long attempts are kept at the longest: past StoreLink's 7-day retention of keys. */
export const ATTEMPT_TTL_MS = 8 * 24 * HOUR_MS;

/** A write's attempt, as recorded with its take. */
export interface AttemptRecord {
  /** The attempt's request id. */
  id: string;
  /** What the reconciler needs, opaque to the book (policy/attempts.ts writes and reads it). */
  record: string;
}

export type AttemptState = "sending" | "uncertain";

/** An attempt as the book lists it. */
export interface AttemptEntry extends AttemptRecord {
  bucket: string;
  state: AttemptState;
  /** Since when it is in its state, on the book's clock. */
  since: number;
  /** Until when a reconciler holds it (0: nobody). */
  leaseUntil: number;
}

export interface SlotBook {
  /**
   * Takes a pending slot named `name` for `holder` (the attempt's own token) if the bucket has
   * room (`limit` slots an hour); joining a pending slot adds `holder` to its holders.
   */
  take(
    bucket: string,
    name: string,
    limit: number,
    holder: string,
    attempt?: AttemptRecord,
  ): Promise<TakeResult>;
  /** As `take`, without taking anything: whether `name` is held, or a new slot would be refused. */
  peek(bucket: string, name: string, limit: number): Promise<TakeResult>;
  /** False when a reconciler's settle found its attempt gone (and so changed nothing). */
  settle(
    bucket: string,
    name: string,
    how: Settle,
    holder: string,
    attemptId?: string,
  ): Promise<boolean>;
  /** Every attempt kept, and the book's clock now. */
  attempts(): Promise<{ now: number; entries: AttemptEntry[] }>;
  /** The attempt's record if it is there and nobody holds it, held now for `leaseMs`. */
  claim(bucket: string, id: string, leaseMs: number): Promise<string | undefined>;
}

interface Slot {
  state: SlotState;
  /** When the slot stops counting, in ms on the book's clock. */
  until: number;
  /** A pending slot's holders. */
  holders: Set<string>;
}

/** The per-process slot book: a map, on this process's clock. */
export class MemorySlotBook implements SlotBook {
  readonly #buckets = new Map<string, Map<string, Slot>>();
  /** Attempts by bucket, then request id. */
  readonly #attempts = new Map<string, Map<string, AttemptEntry>>();

  constructor(private readonly now: () => number = Date.now) {}

  async take(
    bucket: string,
    name: string,
    limit: number,
    holder: string,
    attempt?: AttemptRecord,
  ): Promise<TakeResult> {
    const taken = this.#decide(bucket, name, limit, holder);
    if (attempt && taken.kind !== "full") this.adopt(bucket, attempt, "sending", this.now());
    return taken;
  }

  async peek(bucket: string, name: string, limit: number): Promise<TakeResult> {
    return this.#decide(bucket, name, limit, undefined);
  }

  /** Keeps an attempt (the take's, or one read back from audit.log), unless it is kept already. */
  adopt(bucket: string, { id, record }: AttemptRecord, state: AttemptState, since: number): void {
    const attempts = this.#attempts.get(bucket) ?? new Map<string, AttemptEntry>();
    if (attempts.has(id)) return;
    attempts.set(id, { bucket, id, record, state, since, leaseUntil: 0 });
    this.#attempts.set(bucket, attempts);
  }

  async attempts(): Promise<{ now: number; entries: AttemptEntry[] }> {
    const now = this.now();
    const entries: AttemptEntry[] = [];
    for (const [bucket, attempts] of this.#attempts) {
      for (const [id, entry] of attempts) {
        if (entry.since + ATTEMPT_TTL_MS <= now) attempts.delete(id);
        else entries.push({ ...entry });
      }
      if (attempts.size === 0) this.#attempts.delete(bucket);
    }
    return { now, entries };
  }

  async claim(bucket: string, id: string, leaseMs: number): Promise<string | undefined> {
    const entry = this.#attempts.get(bucket)?.get(id);
    const now = this.now();
    if (!entry || entry.leaseUntil > now) return undefined;
    entry.leaseUntil = now + leaseMs;
    return entry.record;
  }

  async settle(
    bucket: string,
    name: string,
    how: Settle,
    holder: string,
    attemptId?: string,
  ): Promise<boolean> {
    const now = this.now();
    const slots = this.#live(bucket, now);
    const slot = slots.get(name);
    if (attemptId !== undefined) {
      const attempts = this.#attempts.get(bucket);
      const entry = attempts?.get(attemptId);
      if (!entry && isResolution(how)) return false;
      if (how !== "uncertain") attempts?.delete(attemptId);
      else if (entry) Object.assign(entry, { state: "uncertain", since: now });
      if (attempts?.size === 0) this.#attempts.delete(bucket);
    }
    if (how === "confirmed") {
      if (slot) Object.assign(slot, { state: "c", holders: none() });
      else slots.set(name, { state: "c", until: now + HOUR_MS, holders: none() });
    } else if (how === "void") {
      if (slot?.state === "u") slots.delete(name);
      else if (slot?.state === "p" && slot.holders.delete(holder) && slot.holders.size === 0) {
        slots.delete(name);
      }
    } else if (how === "release" || how === "landed") {
      if (how === "landed" && slot?.state === "u") slot.state = "c";
      if (slot?.state === "p" && slot.holders.delete(holder) && slot.holders.size === 0) {
        slots.delete(name);
      }
    } else if (how === "count" || slot?.state !== "c") {
      slots.set(name, {
        state: how === "count" ? "c" : "u",
        until: now + HOUR_MS,
        holders: none(),
      });
    }
    if (slots.size === 0) this.#buckets.delete(bucket);
    else this.#buckets.set(bucket, slots);
    return true;
  }

  /** A take for `holder`, or a peek without one. */
  #decide(bucket: string, name: string, limit: number, holder: string | undefined): TakeResult {
    const now = this.now();
    const slots = this.#live(bucket, now);
    const counts = countsOf(slots.values(), now + HOUR_MS + PENDING_MS - SENDING_MS);
    const held = slots.get(name);
    if (held) {
      if (holder !== undefined && held.state === "p" && !held.holders.has(holder)) {
        held.holders.add(held.holders.size < MAX_HOLDERS ? holder : UNTRACKED);
      }
      return { kind: "held", ...counts };
    }
    if (slots.size >= limit) return { kind: "full", ...counts };
    if (holder === undefined) return { kind: "taken", ...counts };
    slots.set(name, {
      state: "p",
      until: now + HOUR_MS + PENDING_MS,
      holders: new Set([holder]),
    });
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

const none = (): Set<string> => new Set<string>();

/** The counts; a pending slot that stops counting before `staleUntil` was taken past SENDING_MS. */
function countsOf(slots: Iterable<Slot>, staleUntil: number): SlotCounts {
  const counts: SlotCounts = { placed: 0, uncertain: 0, inFlight: 0 };
  for (const { state, until } of slots) {
    if (state === "c") counts.placed++;
    else if (state === "u" || until < staleUntil) counts.uncertain++;
    else counts.inFlight++;
  }
  return counts;
}
