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

  // KNOWN DEFECT, left failing on purpose: it.fails turns red once fixed (then make it a plain
  // it). Error results carry structuredContent {error: {...}} that matches no outputSchema, so
  // the SDK client throws -32602 instead of handing the isError result to the model. Fix in
  // server.ts callTool: omit structuredContent on isError (keep the JSON in the text block), or
  // widen each outputSchema to allow the error shape.
  it.fails("gets a tool error as an isError result, not a thrown -32602", async () => {
    h = await connect();
    await h.client.listTools();
    const result = await h.call("lookup_sku", { query: "" });
    expect(result.isError).toBe(true);
  });
});
