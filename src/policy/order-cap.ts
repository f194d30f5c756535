import { ToolError } from "../errors.js";
import type { Sku, Store } from "../storelink/client.js";

/**
 * The loop guard: at most `perHour` orders for the same store and SKU in a rolling hour. It lives
 * in this MCP process (one instance shared by every request), so with several replicas each
 * counts its own orders. It stops a looping agent; StoreLink's dedupe stops duplicate trucks.
 *
 * It never relies on StoreLink's dedupe: every create holds a free slot before it is sent, and
 * only StoreLink's own answer `replayed: true` (or a refusal before sending) gives it back. A
 * "probable replay" cannot be told apart from a new order in this process (a StoreLink may fold
 * nothing without an Idempotency-Key, or its window may differ), so none passes without a slot.
 */

const HOUR_MS = 60 * 60_000;

export interface OrderCapOptions {
  /** 0 turns the guard off. */
  perHour: number;
  now?: () => number;
}

/** A slot held while a write is in flight. Exactly one of the two must be called. */
export interface Reservation {
  /** A new order was created, or may have been (outcome unknown): it counts. */
  commit(): void;
  /** Nothing new was created (refused, or StoreLink replayed an order): it does not count. */
  release(): void;
}

export type ReserveResult =
  | { ok: true; reservation: Reservation }
  | { ok: false; count: number; limit: number; placed: number; inFlight: number };

interface Entry {
  /** When the order counted from (its commit); for a pending slot, when it was taken. */
  at: number;
  /** Held by a write still in flight: never expires, whatever the clock says. */
  pending: boolean;
}

export class OrderCap {
  readonly perHour: number;
  readonly #now: () => number;
  readonly #entries = new Map<string, Entry[]>();

  constructor(options: OrderCapOptions) {
    this.perHour = options.perHour;
    this.#now = options.now ?? Date.now;
  }

  /**
   * Checks the cap and, if there is room, holds a slot at once (synchronously, so concurrent
   * calls cannot all squeeze under the limit). Every create needs one, retries included; a retry
   * that StoreLink answers with `replayed: true` releases it.
   */
  reserve(storeId: string, sku: string): ReserveResult {
    if (this.perHour <= 0) return { ok: true, reservation: NO_OP };
    const entries = this.#bucket(storeId, sku, this.#now());
    if (entries.length >= this.perHour) {
      const inFlight = entries.filter((entry) => entry.pending).length;
      return {
        ok: false,
        count: entries.length,
        limit: this.perHour,
        placed: entries.length - inFlight,
        inFlight,
      };
    }
    const entry: Entry = { at: this.#now(), pending: true };
    entries.push(entry);
    let settled = false;
    return {
      ok: true,
      reservation: {
        commit: () => {
          if (settled) return;
          settled = true;
          // The rolling hour runs from when the order was created, not from when the buyer
          // started confirming it.
          entry.at = this.#now();
          entry.pending = false;
        },
        release: () => {
          if (settled) return;
          settled = true;
          const index = entries.indexOf(entry);
          if (index >= 0) entries.splice(index, 1);
        },
      },
    };
  }

  /** Would a new order be refused right now? For previews and round 1; holds nothing. */
  isFull(storeId: string, sku: string): boolean {
    return this.perHour > 0 && this.#bucket(storeId, sku, this.#now()).length >= this.perHour;
  }

  /** Orders counted for a store+SKU this hour: placed, and still being written. */
  counts(storeId: string, sku: string): { placed: number; inFlight: number } {
    const entries = this.#bucket(storeId, sku, this.#now());
    const inFlight = entries.filter((entry) => entry.pending).length;
    return { placed: entries.length - inFlight, inFlight };
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
      if (entry && !entry.pending && now - entry.at >= HOUR_MS) entries.splice(i, 1);
    }
    return entries;
  }
}

const NO_OP: Reservation = { commit() {}, release() {} };

/** The refusal the model reads at the cap: what was counted, and who can place a real volume. */
export function capReached(
  store: Store,
  item: Sku,
  limit: number,
  { placed, inFlight }: { placed: number; inFlight: number },
): ToolError {
  const pending =
    inFlight > 0
      ? `, and ${inFlight} more ${inFlight === 1 ? "is" : "are"} being submitted now`
      : "";
  return new ToolError(
    "order_cap_reached",
    `Order limit reached: this server allows ${limit} orders an hour for ${item.name} ` +
      `(SKU ${item.sku}) at ${store.name} (store ${store.store_id}); ${placed} ${placed === 1 ? "was" : "were"} ` +
      `placed in the last hour${pending}. Nothing was submitted. If the volume is real, contact Korral ops to place it.`,
    "Do not retry. Tell the buyer the hourly limit was reached and that Korral ops can place " +
      "the order if the volume is real; check the earlier orders with get_replenishment_status.",
    false,
  );
}

/** For a preview and round 1: throws the cap's refusal if a new order would be refused now. */
export function refuseIfFull(cap: OrderCap | undefined, store: Store, item: Sku): void {
  if (cap?.isFull(store.store_id, item.sku)) {
    throw capReached(store, item, cap.perHour, cap.counts(store.store_id, item.sku));
  }
}

/** For the write itself: holds a slot (see `reserve`), or throws the cap's refusal. */
export function holdSlot(cap: OrderCap | undefined, store: Store, item: Sku): Reservation {
  if (!cap) return NO_OP;
  const held = cap.reserve(store.store_id, item.sku);
  if (!held.ok) throw capReached(store, item, held.limit, held);
  return held.reservation;
}
