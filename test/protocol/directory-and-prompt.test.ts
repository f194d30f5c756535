import { afterEach, describe, expect, it } from "vitest";
import { STORE_DIRECTORY } from "../../src/storelink/directory.js";
import { connect, type Harness } from "../helpers/harness.js";

let h: Harness;
afterEach(async () => {
  await h.close();
});

describe("store directory", () => {
  it("names all five stores in get_stock_position's description", async () => {
    h = await connect();
    const { tools } = await h.client.listTools();
    const description = tools.find((t) => t.name === "get_stock_position")?.description ?? "";
    for (const store of STORE_DIRECTORY) {
      expect(description).toContain(`${store.store_id}: ${store.name}`);
    }
    expect(STORE_DIRECTORY).toHaveLength(5);
  });

  it("is the korral://stores resource, so Brno resolves to 47 and 63", async () => {
    h = await connect();
    const { resources } = await h.client.listResources();
    expect(resources).toEqual([
      expect.objectContaining({ uri: "korral://stores", mimeType: "application/json" }),
    ]);
    const read = await h.client.readResource({ uri: "korral://stores" });
    const content = read.contents[0];
    const { stores } = JSON.parse(content && "text" in content ? content.text : "{}") as {
      stores: { store_id: string; name: string }[];
    };
    expect(stores).toHaveLength(5);
    expect(stores.filter((s) => s.name.includes("Brno")).map((s) => s.store_id)).toEqual([
      "47",
      "63",
    ]);
  });

  it("refuses an unknown resource", async () => {
    h = await connect();
    await expect(h.client.readResource({ uri: "korral://orders" })).rejects.toThrow(
      /Unknown resource/,
    );
  });

  it("stock entries carry store_name", async () => {
    h = await connect();
    const result = await h.call("get_stock_position", { sku: "8847291", store_ids: ["47", "63"] });
    const { stores } = result.structuredContent as { stores: { store_name: string }[] };
    expect(stores.map((s) => s.store_name)).toEqual([
      "Korral Brno-Kralovo Pole",
      "Korral Brno-Lesna",
    ]);
  });
});

describe("replenishment-check prompt", () => {
  it("is listed with its arguments", async () => {
    h = await connect();
    const { prompts } = await h.client.listPrompts();
    expect(prompts).toEqual([
      expect.objectContaining({
        name: "replenishment-check",
        arguments: [
          expect.objectContaining({ name: "product", required: true }),
          expect.objectContaining({ name: "stores", required: false }),
        ],
      }),
    ]);
  });

  it("carries the demo flow and the rules, filled with the buyer's words", async () => {
    h = await connect();
    const prompt = await h.client.getPrompt({
      name: "replenishment-check",
      arguments: { product: "Madeta butter", stores: "Brno, 102" },
    });
    const message = prompt.messages[0];
    const text = message?.content.type === "text" ? message.content.text : "";
    expect(message?.role).toBe("user");
    const steps = [
      "lookup_sku",
      "get_stock_position",
      "create_replenishment_order",
      "get_replenishment_status",
    ];
    const positions = steps.map((s) => text.indexOf(s));
    expect(positions.every((p) => p >= 0)).toBe(true);
    expect([...positions].sort((a, b) => a - b)).toEqual(positions);
    for (const rule of [
      '"Madeta butter"',
      "Brno, 102",
      "Brno is 47 and 63",
      "knife edge",
      "explicit approval",
      "Never compute or suggest a quantity",
      "idempotency_key",
      "SAME idempotency_key",
      "dry_run",
      "Korral ops",
      "Korral IT",
      "supplier",
    ]) {
      expect(text).toContain(rule);
    }
  });

  it("requires a product and refuses unknown prompts", async () => {
    h = await connect();
    await expect(
      h.client.getPrompt({ name: "replenishment-check", arguments: {} }),
    ).rejects.toThrow(/product/);
    await expect(h.client.getPrompt({ name: "order-everything" })).rejects.toThrow(
      /Unknown prompt/,
    );
  });
});
