import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { SecretManagerKeyProvider } from "../../src/keys/secret-manager.js";
import { createRecorder, type Recorder } from "../../src/logging/recorder.js";
import { SEED_ACCEPTED_KEYS } from "../../src/storelink/seed.js";
import { validOrder } from "../helpers/arbitraries.js";
import { findLeaks } from "../helpers/canary.js";
import { FakeSecretManager, grpcError } from "../helpers/fake-secret-manager.js";
import { connect, errorOf, type Harness } from "../helpers/harness.js";
import { captureOpsLog } from "../helpers/ops-log.js";
import { ScriptedStoreLink } from "../helpers/scripted-storelink.js";

/**
 * Secret Manager faults through the MCP protocol, with the real provider over a fake client, the
 * real file recorder and the ops log captured. Each fault on store 47 gives the documented tool
 * error and retryable flag, a REJECTED audit line for the write (nothing sent to StoreLink), one
 * operator warning naming the cause category, and no gRPC text nor key anywhere.
 */

const PATTERN = "projects/{project}/secrets/storelink-key-{store}/versions/latest";
const nameOf = (store: string) =>
  `projects/korral-prod/secrets/storelink-key-${store}/versions/latest`;
const DEADLINE_MS = 100;
// gRPC details as the library would put them: the resource name, and (worst case) a key.
const RAW = `RAW_GRPC_DETAIL on ${nameOf("47")} near ${SEED_ACCEPTED_KEYS["47"]}`;
const COULD_NOT_READ =
  "Could not read the StoreLink credentials for store 47. Ask Korral IT for access.";

interface Case {
  name: string;
  fault: Error | { delayMs: number } | "absent";
  type: string;
  message: string;
  retryable: boolean;
  /** The cause category in the operator warning; none for a missing secret (a normal state). */
  opsReason?: string;
}

const CASES: Case[] = [
  {
    name: "NOT_FOUND (no secret for the store)",
    fault: "absent",
    type: "no_credentials",
    message: "No credentials for store 47. Ask Korral IT for access.",
    retryable: false,
  },
  {
    name: "PERMISSION_DENIED",
    fault: grpcError(7, RAW),
    type: "no_credentials",
    message: COULD_NOT_READ,
    retryable: false,
    opsReason: "permission denied on the store's secret",
  },
  {
    name: "UNAVAILABLE",
    fault: grpcError(14, RAW),
    type: "no_credentials",
    message: COULD_NOT_READ,
    retryable: true,
    opsReason: "Secret Manager unavailable",
  },
  {
    name: "DEADLINE_EXCEEDED",
    fault: grpcError(4, RAW),
    type: "no_credentials",
    message: COULD_NOT_READ,
    retryable: true,
    opsReason: "Secret Manager deadline exceeded",
  },
  {
    name: "slower than the deadline",
    fault: { delayMs: DEADLINE_MS * 5 },
    type: "no_credentials",
    message: COULD_NOT_READ,
    retryable: true,
    opsReason: `no answer from Secret Manager within ${DEADLINE_MS} ms`,
  },
];

let dir: string;
let ops: ReturnType<typeof captureOpsLog>;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "korral-smfault-"));
  // The provider warns through the ops log: capture it (at the most verbose level) to search it.
  ops = captureOpsLog();
});
afterAll(async () => {
  ops.restore();
  await rm(dir, { recursive: true, force: true });
});

let h: Harness | undefined;
let recorder: Recorder | undefined;
afterEach(async () => {
  await h?.close();
  await recorder?.close();
  h = undefined;
  recorder = undefined;
});

async function setUp(c: Case, logDir: string) {
  const fake = new FakeSecretManager();
  for (const [store, key] of Object.entries(SEED_ACCEPTED_KEYS)) {
    if (!(store === "47" && c.fault === "absent")) fake.secrets.set(nameOf(store), key);
  }
  if (c.fault !== "absent") fake.faults.set(nameOf("47"), c.fault);
  const keys = new SecretManagerKeyProvider({
    client: fake,
    project: "korral-prod",
    namePattern: PATTERN,
    deadlineMs: DEADLINE_MS,
  });
  const storelink = new ScriptedStoreLink();
  recorder = createRecorder({ dir: logDir });
  h = await connect({ keys, storelink, recorder });
  return { fake, storelink, h };
}

const entries = (result: CallToolResult) =>
  (result.structuredContent as { stores: Record<string, unknown>[] }).stores;

describe("Secret Manager faults through the protocol", () => {
  it.each(CASES)("$name: documented error, REJECTED audit, nothing leaked", async (c) => {
    const logDir = join(dir, c.name.replace(/\W+/g, "-"));
    const opsBefore = ops.text().length;
    const { fake, storelink, h } = await setUp(c, logDir);

    // The write: refused before anything reaches StoreLink.
    const write = await h.call("create_replenishment_order", validOrder("47"));
    expect(errorOf(write)).toMatchObject({
      type: c.type,
      message: c.message,
      retryable: c.retryable,
    });
    expect(storelink.attemptsOf("createOrder")).toBe(0);

    // A read degrades per store: 102's key is fine, 47's entry carries the same error.
    const read = await h.call("get_stock_position", { sku: "8847291", store_ids: ["47", "102"] });
    expect(read.isError).toBeFalsy();
    expect(entries(read)).toMatchObject([
      { store_id: "47", status: "error", error: { type: c.type, retryable: c.retryable } },
      { store_id: "102", status: "ok", on_hand: 9 },
    ]);

    // The fault clears (the secret is granted, the outage ends): the very next write lands.
    fake.faults.delete(nameOf("47"));
    fake.secrets.set(nameOf("47"), SEED_ACCEPTED_KEYS["47"] as string);
    const retry = await h.call("create_replenishment_order", validOrder("47"));
    expect(retry.structuredContent).toMatchObject({ order_id: "RPL-47-001" });
    await h.close();
    await recorder?.close();

    const audit = (await readFile(join(logDir, "audit.log"), "utf8")).trimEnd().split("\n");
    expect(audit.map((line) => line.split(" ").slice(1, 4).join(" "))).toEqual([
      "REJECTED - store=47",
      "CREATED RPL-47-001 store=47",
    ]);
    expect(audit[0]).toContain(`detail="${c.message}"`);
    const trace = (await readFile(join(logDir, "trace.jsonl"), "utf8")).trimEnd().split("\n");
    const firstTrace = JSON.parse(trace[0] as string) as Record<string, unknown>;
    expect(firstTrace).toMatchObject({ tool: "create_replenishment_order", status: "error" });
    expect(audit[0]).toContain(`req=${firstTrace.request_id}`);

    // The operator gets the cause category, once per failed lookup (the write and the read).
    const opsLines = ops.text().slice(opsBefore);
    const warnings = opsLines.split("\n").filter((l) => l.includes("key lookup failed"));
    if (c.opsReason === undefined) expect(warnings).toEqual([]);
    else {
      expect(warnings).toHaveLength(2);
      for (const w of warnings) expect(JSON.parse(w)).toMatchObject({ reason: c.opsReason });
    }

    // Neither gRPC's text nor any key: results, audit, trace, ops log.
    const everything = [
      JSON.stringify([write, read, retry]),
      audit.join("\n"),
      trace.join("\n"),
      opsLines,
    ].join("\n");
    expect(everything).not.toContain("RAW_GRPC_DETAIL");
    expect(findLeaks("sm-fault", everything, Object.values(SEED_ACCEPTED_KEYS))).toEqual([]);
  });

  it("a slow answer that arrives after the deadline is dropped, not used and not thrown", async () => {
    const c = CASES.at(-1) as Case;
    const { fake, storelink, h } = await setUp(c, join(dir, "late"));
    const write = await h.call("create_replenishment_order", validOrder("47"));
    expect(errorOf(write).retryable).toBe(true);
    // Let the slow access settle; an unhandled rejection or late write would fail the run.
    await new Promise((resolve) => setTimeout(resolve, DEADLINE_MS * 6));
    expect(fake.calls.filter((call) => call.name === nameOf("47"))).toEqual([
      { name: nameOf("47"), options: { timeout: DEADLINE_MS } },
    ]);
    expect(storelink.attemptsOf("createOrder")).toBe(0);
  });
});
