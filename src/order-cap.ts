/**
 * The loop guard: at most `perHour` orders for the same store and SKU in a rolling hour. It lives
 * in this MCP process (one instance shared by every request), so with several replicas each
 * counts its own orders. It stops a looping agent; StoreLink's dedupe stops duplicate trucks.
 */

const HOUR_MS = 60 * 60_000;

export interface OrderCapOptions {
  /** 0 turns the guard off. */
  perHour: number;
  /**
   * How long an identical key-less request counts as a probable replay (StoreLink's dedupe
   * window), so a retry is not refused by the orders it would replay.
   */
  replayWindowMs: number;
  now?: () => number;
}

/** What identifies a retry of the same order: the idempotency key, or else the parameters. */
export type ReplayToken = { kind: "key"; value: string } | { kind: "params"; value: string };

/** A slot held while a write is in flight. Exactly one of the two must be called. */
export interface Reservation {
  /** A new order was created, or may have been (outcome unknown): it counts. */
  commit(): void;
  /** Nothing new was created (refused, or StoreLink replayed an order): it does not count. */
  release(): void;
}

export type ReserveResult =
  | { ok: true; reservation: Reservation }
  | { ok: false; count: number; limit: number };

interface Entry {
  at: number;
  token: string;
  tokenKind: ReplayToken["kind"];
}

export class OrderCap {
  readonly perHour: number;
  readonly #replayWindowMs: number;
  readonly #now: () => number;
  readonly #entries = new Map<string, Entry[]>();

  constructor(options: OrderCapOptions) {
    this.perHour = options.perHour;
    this.#replayWindowMs = options.replayWindowMs;
    this.#now = options.now ?? Date.now;
  }

  /**
   * Checks the cap and, if there is room, holds a slot at once (synchronously, so concurrent
   * calls cannot all squeeze under the limit). A probable replay of a counted order passes
   * without a slot: StoreLink will return the existing order.
   */
  reserve(storeId: string, sku: string, token: ReplayToken): ReserveResult {
    if (this.perHour <= 0) return { ok: true, reservation: NO_OP };
    const now = this.#now();
    const entries = this.#bucket(storeId, sku, now);

    const tokenValue = `${token.kind}\u0000${token.value}`;
    const probableReplay = entries.some(
      (e) => e.token === tokenValue && (e.tokenKind === "key" || now - e.at < this.#replayWindowMs),
    );
    if (probableReplay) {
      // If StoreLink creates after all (its window passed), the new order still counts.
      return {
        ok: true,
        reservation: {
          commit: () => entries.push({ at: this.#now(), token: tokenValue, tokenKind: token.kind }),
          release: () => {},
        },
      };
    }
    if (entries.length >= this.perHour) {
      return { ok: false, count: entries.length, limit: this.perHour };
    }
    const entry: Entry = { at: now, token: tokenValue, tokenKind: token.kind };
    entries.push(entry);
    return {
      ok: true,
      reservation: {
        commit: () => {},
        release: () => {
          const index = entries.indexOf(entry);
          if (index >= 0) entries.splice(index, 1);
        },
      },
    };
  }

  /** Would a new order be refused right now? For previews; holds nothing. */
  isFull(storeId: string, sku: string): boolean {
    return this.perHour > 0 && this.#bucket(storeId, sku, this.#now()).length >= this.perHour;
  }

  /** The live entries for a store+SKU, pruned in place (reservations hold the same array). */
  #bucket(storeId: string, sku: string, now: number): Entry[] {
    const bucketKey = `${storeId}\u0000${sku}`;
    let entries = this.#entries.get(bucketKey);
    if (!entries) {
      entries = [];
      this.#entries.set(bucketKey, entries);
    }
    for (let i = entries.length - 1; i >= 0; i--) {
      const entry = entries[i];
      if (entry && now - entry.at >= HOUR_MS) entries.splice(i, 1);
    }
    return entries;
  }
}

const NO_OP: Reservation = { commit() {}, release() {} };
