import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, expect, it } from "vitest";
import { createRecorder } from "../../src/logging/recorder.js";
import { connect, HERO_REASON } from "../helpers/harness.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "korral-ws-logs-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

it("audit.log records a preview as PREVIEW and a retry as REPLAYED, never a second CREATED", async () => {
  const recorder = createRecorder({ dir, warn: () => {} });
  const h = await connect({ recorder });
  const args = {
    store_id: "47",
    sku: "8847291",
    quantity: 24,
    reason: HERO_REASON,
    idempotency_key: "audit-approval-0001",
  };
  await h.call("create_replenishment_order", { ...args, dry_run: true });
  await h.call("create_replenishment_order", args);
  await h.call("create_replenishment_order", args);
  await h.close();
  await recorder.close();
  const lines = (await readFile(join(dir, "audit.log"), "utf8")).trimEnd().split("\n");
  expect(lines.map((line) => line.split(" ").slice(1, 3).join(" "))).toEqual([
    "PREVIEW -",
    "CREATED RPL-47-001",
    "REPLAYED RPL-47-001",
  ]);
  for (const line of lines) expect(line).toContain(`reason=${JSON.stringify(HERO_REASON)}`);
});
