import { afterEach, describe, expect, it } from "vitest";
import { connect, type Harness } from "../helpers/harness.js";

/**
 * Real clients call tools/list before tools/call; the SDK Client then validates every
 * structuredContent against the tool's outputSchema, error results included.
 */

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

describe("an SDK client that has listed the tools", () => {
  it("still gets successful results (they match the output schemas)", async () => {
    h = await connect();
    await h.client.listTools();
    const result = await h.call("lookup_sku", { query: "butter" });
    expect(result.isError).toBeFalsy();
  });

  // Every outputSchema admits the error shape (src/errors.ts errorResultSchema): without it the
  // SDK client throws -32602 instead of handing the isError result to the model.
  it("gets a tool error as an isError result, not a thrown -32602", async () => {
    h = await connect();
    await h.client.listTools();
    const result = await h.call("lookup_sku", { query: "" });
    expect(result.isError).toBe(true);
  });
});

describe("the advertised output schemas", () => {
  it("admit each tool's result and the error shape, and nothing else", async () => {
    h = await connect();
    const { tools } = await h.client.listTools();
    for (const tool of tools) {
      const branches = (tool.outputSchema as { anyOf?: { required?: string[] }[] }).anyOf;
      expect(branches, tool.name).toHaveLength(2);
      expect(branches?.[1]?.required).toEqual(["error"]);
    }
  });
});
