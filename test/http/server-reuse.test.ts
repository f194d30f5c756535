import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { composeDeps } from "../../src/deps.js";
import { createApp } from "../../src/http/app.js";
import { MapKeyProvider, MemoryRecorder } from "../helpers/harness.js";
import { type Listening, listen } from "../helpers/listen.js";
import { MCP_HEADERS, toolCall } from "../helpers/rpc.js";
import { SlowStoreLink } from "../helpers/slow-storelink.js";

/**
 * Every POST has an MCP server of its own (or the fast path). These tests attack that: a request's
 * late answer must never reach someone else's POST, even when both use the same id.
 */

// Butter is slow at store 47 (the call the client abandons); milk is slower at store 102.
const DELAYS: Record<string, number> = { "47:8847291": 300, "102:8847315": 600 };
const storelink = new SlowStoreLink((store, sku) => DELAYS[`${store}:${sku}`] ?? 0);
const recorder = new MemoryRecorder();
let server: Listening;

beforeAll(async () => {
  server = await listen(
    createApp(composeDeps({ storelink, keys: new MapKeyProvider(), recorder })),
  );
});
afterAll(() => server.close());

type Answer = { id: number; result: { structuredContent: { sku: string } } };

const stock = (sku: string, store: string, signal?: AbortSignal) =>
  fetch(server.url, {
    method: "POST",
    signal,
    headers: MCP_HEADERS,
    // Every request uses id 1, as simple clients do: ids alone cannot tell answers apart.
    body: JSON.stringify(toolCall(1, "get_stock_position", { sku, store_ids: [store] })),
  });

describe("one MCP server per POST", () => {
  it("serve one request after another, each with its own answer", async () => {
    for (const sku of ["8847402", "6620118", "4410093", "8847402"]) {
      const answer = (await (await stock(sku, "111")).json()) as Answer;
      expect(answer.result.structuredContent.sku).toBe(sku);
    }
  });

  it("never hand an abandoned call's late answer to the next request", async () => {
    const abandoned = new AbortController();
    const first = stock("8847291", "47", abandoned.signal).catch((error: unknown) => error);
    await new Promise((resolve) => setTimeout(resolve, 50));
    abandoned.abort();
    expect(await first).toBeInstanceOf(Error);
    // Sent while the butter read is still running, and answered after it finishes: had the
    // abandoned call's server served this POST too, butter's answer (also id 1) would arrive here.
    await new Promise((resolve) => setTimeout(resolve, 10));
    const answer = (await (await stock("8847315", "102")).json()) as Answer;
    expect(answer.id).toBe(1);
    expect(answer.result.structuredContent.sku).toBe("8847315");
  });
});
