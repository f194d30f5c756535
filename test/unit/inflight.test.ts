import { afterEach, describe, expect, it } from "vitest";
import type { ApiKey } from "../../src/keys/api-key.js";
import { inflightCalls } from "../../src/lifecycle/inflight.js";
import type { AuditRecord } from "../../src/logging/records.js";
import { ABANDONED_DETAIL, ABANDONED_UNSENT_DETAIL } from "../../src/policy/audit.js";
import type { CreatedOrder, OrderRequest, StockReading } from "../../src/storelink/client.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";
import { connect, HERO_REASON, MemoryRecorder } from "../helpers/harness.js";

/** StoreLink whose writes and stock reads wait until the test opens the gate. */
class GatedStoreLink extends InMemoryStoreLink {
  #open!: () => void;
  readonly gate = new Promise<void>((resolve) => {
    this.#open = resolve;
  });
  reached = 0;
  open(): void {
    this.#open();
  }
  override async createOrder(request: OrderRequest, key: ApiKey): Promise<CreatedOrder> {
    this.reached++;
    await this.gate;
    return super.createOrder(request, key);
  }
  override async getStock(storeId: string, sku: string, key: ApiKey): Promise<StockReading> {
    this.reached++;
    await this.gate;
    return super.getStock(storeId, sku, key);
  }
}

const ORDER = { store_id: "47", sku: "8847291", quantity: 24, reason: HERO_REASON };
const until = async (check: () => boolean) => {
  while (!check()) await new Promise((resolve) => setTimeout(resolve, 1));
};

const gates: GatedStoreLink[] = [];
const disks: (() => void)[] = [];
afterEach(async () => {
  for (const gate of gates.splice(0)) gate.open();
  for (const sync of disks.splice(0)) sync();
  await inflightCalls.whenIdle();
});
const gated = () => {
  const storelink = new GatedStoreLink();
  gates.push(storelink);
  return storelink;
};

describe("in-flight tool calls", () => {
  it("a write waiting for StoreLink is audited UNCERTAIN with its facts when abandoned", async () => {
    const storelink = gated();
    const h = await connect({ storelink });
    void h.call("create_replenishment_order", ORDER);
    await until(() => storelink.reached === 1);

    expect(inflightCalls.size).toBe(1);
    expect(inflightCalls.abandonAll()).toBe(1);
    expect(h.recorder.audits).toEqual([
      expect.objectContaining({
        outcome: "UNCERTAIN",
        order_id: null,
        store_id: "47",
        sku: "8847291",
        quantity: 24,
        reason: HERO_REASON,
        request_id: expect.stringMatching(/^req_/),
        detail: ABANDONED_DETAIL,
      }),
    ]);
    // Twice is still one line.
    expect(inflightCalls.abandonAll()).toBe(0);
    expect(h.recorder.audits).toHaveLength(1);
  });

  it("a write stopped before it reached StoreLink is REJECTED: nothing was sent", async () => {
    // Gated at the live stock read, before the order is handed to createOrder.
    const storelink = gated();
    const elicited: unknown[] = [];
    const asking = await connect(
      { storelink },
      {
        capabilities: { elicitation: { form: {} } },
        onElicit: async () => {
          elicited.push(1);
          return { action: "accept", content: { confirm: true } };
        },
      },
    );
    const pending = asking.call("create_replenishment_order", ORDER).catch(() => {});
    await until(() => storelink.reached === 1);
    expect(elicited).toEqual([]);
    expect(inflightCalls.abandonAll()).toBe(1);
    expect(asking.recorder.audits).toEqual([
      expect.objectContaining({
        outcome: "REJECTED",
        store_id: "47",
        quantity: 24,
        detail: ABANDONED_UNSENT_DETAIL,
      }),
    ]);
    expect(asking.recorder.traces.at(-1)?.error).toBe(
      "internal: stopped by shutdown before the order was sent",
    );
    // The abandoned call runs on (this process did not exit): let it finish here, not in the
    // next test.
    storelink.open();
    await pending;
  });

  it("a write that already wrote its line (still being synced) gets no second one", async () => {
    const slowDisk = new MemoryRecorder();
    slowDisk.audit = async (record: AuditRecord) => {
      slowDisk.audits.push(record);
      await new Promise<void>((resolve) => disks.push(resolve));
    };
    const h = await connect({ recorder: slowDisk });
    const answer = h.call("create_replenishment_order", ORDER);
    await until(() => slowDisk.audits.length === 1);

    expect(inflightCalls.size).toBe(1);
    expect(inflightCalls.abandonAll()).toBe(0);
    expect(slowDisk.audits.map((a) => a.outcome)).toEqual(["CREATED"]);
    for (const sync of disks.splice(0)) sync();
    await answer;
    expect(inflightCalls.size).toBe(0);
  });

  it("a read is waited for but never audited", async () => {
    const storelink = gated();
    const h = await connect({ storelink });
    const answer = h.call("get_stock_position", { sku: "8847291", store_ids: ["47"] });
    await until(() => storelink.reached === 1);
    let idle = false;
    void inflightCalls.whenIdle().then(() => {
      idle = true;
    });

    expect(inflightCalls.abandonAll()).toBe(0);
    expect(h.recorder.audits).toEqual([]);
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(idle).toBe(false);
    storelink.open();
    await answer;
    await until(() => idle);
  });

  it("a write whose client went away (server closed, signal aborted) is still audited", async () => {
    const storelink = gated();
    const h = await connect({ storelink });
    void h.call("create_replenishment_order", ORDER).catch(() => {});
    await until(() => storelink.reached === 1);
    await h.close();
    storelink.open();
    await inflightCalls.whenIdle();

    expect(h.recorder.audits).toEqual([
      expect.objectContaining({ outcome: "CREATED", order_id: "RPL-47-001" }),
    ]);
  });
});
