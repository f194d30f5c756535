import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { OrderCap } from "../../src/policy/order-cap.js";
import { SEED_STOCK } from "../../src/storelink/seed.js";
import { connect, errorOf, type Harness, HERO_REASON } from "../helpers/harness.js";

/** The README is a guide: short, opening with the two commands, and true about the demo. */
const README = readFileSync(join(import.meta.dirname, "../../README.md"), "utf8");
const defaults = loadConfig({});

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

describe("README.md", () => {
  it("is at most 200 lines and opens with the command that serves and the one that tests", () => {
    expect(README.split("\n").length).toBeLessThanOrEqual(200);
    const first = /```bash\n([\s\S]*?)```/.exec(README)?.[1] ?? "";
    expect(first).toMatch(/^npm ci && npm run serve\s/m);
    expect(first).toMatch(/^npm test\s/m);
  });

  it("shows the hero case as the embedded StoreLink seeds it", () => {
    const rows = [...README.matchAll(/^\| (\d+) \| (\d+) \| (\d+) \| \**([+−-]?\d+)/gm)];
    expect(rows.map((m) => m[1])).toEqual(Object.keys(SEED_STOCK["8847291"] ?? {}));
    for (const [, store = "", onHand, sold, gap = ""] of rows) {
      const [seedOnHand, seedSold] = SEED_STOCK["8847291"]?.[store] ?? [];
      expect([Number(onHand), Number(sold)], store).toEqual([seedOnHand, seedSold]);
      expect(Number(gap.replace("−", "-")), store).toBe(Number(sold) - Number(onHand));
    }
  });

  it("states the defaults it relies on: the cap and the replay window", () => {
    expect(README).toContain(`\`KORRAL_ORDER_CAP_PER_HOUR\` (${defaults.orderCapPerHour})`);
    expect(README).toContain(`within ${defaults.dedupeWindowMs / 60_000} minutes`);
  });

  it("is right that a repeated demo order is replayed and a fourth new one is refused", async () => {
    expect(README).toMatch(/comes back `replayed: true`/);
    expect(README).toMatch(/a fourth new order .* is refused .*`order_cap_reached`/s);
    const harness = await connect({
      orderCap: new OrderCap({ perHour: defaults.orderCapPerHour }),
    });
    h = harness;
    const order = (quantity: number) =>
      harness.call("create_replenishment_order", {
        store_id: "47",
        sku: "8847291",
        quantity,
        reason: HERO_REASON,
      });
    const first = (await order(24)).structuredContent as { order_id: string };
    const again = await order(24);
    expect(again.structuredContent).toMatchObject({ replayed: true, order_id: first.order_id });
    expect((await order(25)).isError).toBeFalsy();
    expect((await order(26)).isError).toBeFalsy();
    expect(errorOf(await order(27)).type).toBe("order_cap_reached");
  });
});
