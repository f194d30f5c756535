import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { composeDeps } from "../../src/deps.js";
import { createApp } from "../../src/http/app.js";
import { SEED_SKUS } from "../../src/storelink/seed.js";
import { MapKeyProvider, MemoryRecorder } from "../helpers/harness.js";
import { type Listening, listen } from "../helpers/listen.js";
import { SlowStoreLink } from "../helpers/slow-storelink.js";

// Later-started calls finish first: delays fall as the SKU's index in the catalogue rises.
const skus = SEED_SKUS.map((s) => s.sku);
const storelink = new SlowStoreLink((_store, sku) => 10 + 15 * (skus.length - skus.indexOf(sku)));
const recorder = new MemoryRecorder();
let server: Listening;

beforeAll(async () => {
  server = await listen(
    createApp(composeDeps({ storelink, keys: new MapKeyProvider(), recorder })),
  );
});
afterAll(() => server.close());

const callStock = async (id: string, sku: string, stores: string[]) => {
  const res = await fetch(server.url, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id,
      method: "tools/call",
      params: { name: "get_stock_position", arguments: { sku, store_ids: stores } },
    }),
  });
  expect(res.status).toBe(200);
  return (await res.json()) as {
    id: string;
    result: { structuredContent: { sku: string; stores: { store_id: string }[] } };
  };
};

describe("concurrent slow calls over HTTP", () => {
  it("answer each request with its own id and its own result", async () => {
    const storeSets = [["47"], ["47", "102"], ["111", "128", "63"]];
    const calls = Array.from({ length: 36 }, (_, i) => ({
      id: `req-${i}`,
      sku: skus[i % skus.length] as string,
      stores: storeSets[i % storeSets.length] as string[],
    }));
    const answers = await Promise.all(calls.map((c) => callStock(c.id, c.sku, c.stores)));

    // The fake really overlapped the calls, so a mix-up had every chance to happen.
    expect(storelink.maxInFlight).toBeGreaterThan(5);
    answers.forEach((answer, i) => {
      const call = calls[i];
      expect(answer.id).toBe(call?.id);
      expect(answer.result.structuredContent.sku).toBe(call?.sku);
      expect(answer.result.structuredContent.stores.map((s) => s.store_id)).toEqual(call?.stores);
    });
    // One trace per call, each with its own request id.
    const ids = new Set(recorder.traces.map((t) => t.request_id));
    expect(ids.size).toBe(calls.length);
  });
});
