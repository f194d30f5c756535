import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SecretManagerKeyProvider } from "../../src/keys/secret-manager.js";
import { createRecorder } from "../../src/logging/recorder.js";
import { CONFIRMED_BY_KEY_DETAIL } from "../../src/policy/audit.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";
import { startEmulator } from "../../src/storelink-emulator.js";
import { validOrder } from "../helpers/arbitraries.js";
import { canaryKeys, filesUnder, findLeaks } from "../helpers/canary.js";
import { FakeSecretManager, grpcError } from "../helpers/fake-secret-manager.js";
import { connect } from "../helpers/harness.js";
import { captureOpsLog } from "../helpers/ops-log.js";
import { EVERY_PATH } from "../helpers/paths.js";
import { MCP_HEADERS, modernHeaders, modernMeta, toolCall } from "../helpers/rpc.js";
import { ScriptedStoreLink } from "../helpers/scripted-storelink.js";
import { freePort, spawnDist, waitForHealthy } from "../helpers/spawn.js";

/**
 * The secrets canary at the two seams canary.test.ts does not reach: keys read from Secret
 * Manager (a fake client whose payloads, and whose error details, are canaries) and keys sent over
 * HTTP to StoreLink (the emulator accepts only canaries; the built dist/http.js talks to it).
 * Every path, success and failure, is driven; no canary, raw or encoded, may appear in any
 * result, error, log file, ops line, stdout or stderr.
 */

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "korral-canary-seams-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const PATTERN = "projects/{project}/secrets/storelink-key-{store}/versions/latest";
const nameOf = (store: string) =>
  `projects/korral-prod/secrets/storelink-key-${store}/versions/latest`;

describe("secrets canary through the Secret Manager provider", () => {
  it("no canary in results, traces, audit lines or the ops log, on any path", async () => {
    // StoreLink accepts these; Secret Manager holds them (47, 102, 111, 128) or a stale one (63).
    const accepted = canaryKeys(["47", "63", "102", "111", "128"]);
    const stale = canaryKeys(["63"]);
    const inErrors = canaryKeys(["err"]);
    const all = [...Object.values(accepted), ...Object.values(stale), ...Object.values(inErrors)];

    const fake = new FakeSecretManager();
    for (const store of ["47", "102", "111", "128"]) {
      // Bytes with a trailing newline, as `gcloud secrets versions add --data-file` stores them.
      fake.secrets.set(nameOf(store), new Uint8Array(Buffer.from(`${accepted[store]}\n`)));
    }
    fake.secrets.set(nameOf("63"), stale["63"] as string);
    const leakyDetail = `${inErrors.err} ${Buffer.from(inErrors.err as string).toString("base64")}`;

    const ops = captureOpsLog();
    const logDir = join(dir, "sm-log");
    const recorder = createRecorder({ dir: logDir });
    const storelink = new ScriptedStoreLink(new InMemoryStoreLink({ acceptedKeys: accepted }));
    const keys = new SecretManagerKeyProvider({
      client: fake,
      project: "korral-prod",
      namePattern: PATTERN,
      deadlineMs: 100,
    });
    const h = await connect({ storelink, keys, recorder });
    const outputs: unknown[] = [];
    try {
      const drive = async () => {
        for (const call of EVERY_PATH) {
          outputs.push(await h.call(call.name, call.arguments).catch((e: unknown) => String(e)));
        }
      };
      await drive();
      // Every Secret Manager failure, its gRPC details carrying a canary raw and in base64.
      for (const code of [7, 14, 4, 16, 9, 8, 13]) {
        fake.faults.set(nameOf("47"), grpcError(code, leakyDetail));
        outputs.push(await h.call("create_replenishment_order", validOrder("47")));
        outputs.push(await h.call("get_stock_position", { sku: "8847291", store_ids: ["47"] }));
      }
      fake.faults.set(nameOf("47"), { delayMs: 300 });
      outputs.push(await h.call("create_replenishment_order", validOrder("47")));
      fake.faults.delete(nameOf("47"));
      // Every StoreLink failure on the write with a Secret Manager key, and a crash naming it.
      storelink.fail(
        "createOrder",
        { kind: "unavailable" },
        { after: "outcome_unknown" },
        { kind: "unauthorized" },
        { crash: `socket hang up (key ${accepted["47"]})` },
      );
      for (let i = 0; i < 4; i++) {
        outputs.push(await h.call("create_replenishment_order", validOrder("47")));
      }
      // The whole Secret Manager down for every store.
      fake.failWith = grpcError(14, leakyDetail);
      await drive();
    } finally {
      await h.close();
      await recorder.close();
      ops.restore();
    }

    const files = await filesUnder(logDir);
    // The paths really ran: orders were created with Secret Manager keys, failures were logged.
    expect(files.map((f) => f.text).join("")).toContain("RPL-47-001");
    expect(ops.text()).toContain("Secret Manager key lookup failed");
    const found = [
      ...findLeaks("results", JSON.stringify(outputs), all),
      ...findLeaks("ops log", ops.text(), all),
      ...files.flatMap((f) => findLeaks(f.path, f.text, all)),
    ];
    expect(found).toEqual([]);
  });
});

describe("secrets canary through HttpStoreLinkClient to the emulator", () => {
  it("spawned dist/http.js over HTTP StoreLink: nothing in responses, stdout, stderr or the log dir", async () => {
    // The emulator accepts only canaries. The keys file holds accepted ones for 47, 102 and 111,
    // a stale one for 63 (401, reload, 401: the likeliest leak path) and one for store 999.
    const accepted = canaryKeys(["47", "63", "102", "111", "128"]);
    const held = { ...accepted, ...canaryKeys(["63", "999"]) };
    delete (held as Record<string, string>)["128"];
    const all = [...Object.values(accepted), ...Object.values(held)];

    const emulator = await startEmulator({
      storelink: new InMemoryStoreLink({ acceptedKeys: accepted }),
    });
    const keysFile = join(dir, "http-keys.json");
    const logDir = join(dir, "http-log");
    await writeFile(keysFile, JSON.stringify(held));
    const port = await freePort();
    const server = spawnDist("http.js", {
      PORT: String(port),
      HOST: "127.0.0.1",
      STORELINK_URL: emulator.url,
      STORELINK_TIMEOUT_MS: "400",
      KORRAL_KEYS_FILE: keysFile,
      KORRAL_LOG_DIR: logDir,
      KORRAL_ORDER_CAP_PER_HOUR: "0",
      LOG_LEVEL: "trace",
    });
    const bodies: string[] = [];
    let id = 0;
    const call = async (name: string, args: Record<string, unknown>) => {
      const res = await fetch(`http://127.0.0.1:${port}/mcp`, {
        method: "POST",
        headers: MCP_HEADERS,
        body: JSON.stringify(toolCall(++id, name, args)),
      });
      expect(res.status).toBeLessThan(500);
      const body = await res.text();
      bodies.push(`${JSON.stringify([...res.headers])} ${body}`);
      return body;
    };
    // The same calls in the 2026-07-28 era: plain reads take the fast path, the write the SDK's,
    // and a client that can be asked goes through both rounds (the state is in the answer).
    const modernCall = async (
      name: string,
      args: Record<string, unknown>,
      { ask = false, extra = {} }: { ask?: boolean; extra?: Record<string, unknown> } = {},
    ) => {
      const capabilities = ask ? { elicitation: { form: {} } } : {};
      const message = toolCall(++id, name, args);
      const res = await fetch(`http://127.0.0.1:${port}/mcp`, {
        method: "POST",
        headers: modernHeaders("tools/call", name),
        body: JSON.stringify({
          ...message,
          params: {
            ...message.params,
            ...extra,
            _meta: modernMeta(capabilities, "canary"),
          },
        }),
      });
      expect(res.status).toBeLessThan(500);
      const body = await res.text();
      bodies.push(`${JSON.stringify([...res.headers])} ${body}`);
      return body;
    };
    const modernPaths = async () => {
      for (const c of EVERY_PATH) await modernCall(c.name, c.arguments);
      const order = { ...validOrder("47"), quantity: 7 };
      const round1 = JSON.parse(
        await modernCall("create_replenishment_order", order, { ask: true }),
      );
      await modernCall("create_replenishment_order", order, {
        ask: true,
        extra: {
          requestState: round1.result?.requestState,
          inputResponses: { confirm: { action: "accept", content: { confirm: true } } },
        },
      });
    };
    try {
      await waitForHealthy(server, `http://127.0.0.1:${port}/healthz`);
      for (const c of EVERY_PATH) await call(c.name, c.arguments);
      await modernPaths();
      // The write's transport faults, each with the canary key on the wire. An answer lost after
      // the order landed is confirmed by reading its idempotency key (the canary on that wire too):
      // the agent gets the order.
      emulator.faults.cutAfterOrders = 1;
      const cut = await call("create_replenishment_order", { ...validOrder("47"), quantity: 2 });
      expect(cut).not.toContain("outcome_unknown");
      expect(cut).toContain('\\"quantity\\":2,');
      emulator.faults.refuseOrders = [
        { status: 500, code: "internal" },
        { status: 503, code: "unavailable" },
      ];
      // A 500 refused before acting: the key is never found within the write's budget, UNCERTAIN.
      expect(
        await call("create_replenishment_order", { ...validOrder("47"), quantity: 3 }),
      ).toContain("outcome_unknown");
      await call("create_replenishment_order", { ...validOrder("47"), quantity: 4 });
      emulator.faults.stallAfterOrders = 1;
      const stalled = await call("create_replenishment_order", {
        ...validOrder("47"),
        quantity: 5,
      });
      expect(stalled).not.toContain("outcome_unknown");
      expect(stalled).toContain('\\"quantity\\":5,');
      // StoreLink gone: connection refused on reads and writes.
      await emulator.close();
      for (const c of EVERY_PATH) await call(c.name, c.arguments);
      await modernPaths();
    } finally {
      await server.stop();
      await emulator.close();
    }

    const files = await filesUnder(logDir);
    // The success paths really ran over HTTP with canary keys, so the search covers them.
    expect(bodies.join("\n")).toContain("RPL-47-001");
    expect(files.map((f) => f.text).join("")).toContain("UNCERTAIN");
    // Both lost answers were confirmed by key (one CREATED line each, with the detail).
    expect(
      files
        .map((f) => f.text)
        .join("")
        .split("\n")
        .filter(
          (l) => / CREATED .* qty=[25] .*detail=/.test(l) && l.includes(CONFIRMED_BY_KEY_DETAIL),
        ),
    ).toHaveLength(2);
    expect(bodies.join("\n")).toContain("Authentication failed for store 63 after key reload");
    // The 2026-07-28 rounds really ran: asked, then written with the buyer's answer.
    expect(bodies.join("\n")).toContain('"resultType":"input_required"');
    expect(files.map((f) => f.text).join("")).toMatch(
      / CREATED RPL-47-\d+ store=47 sku=\S+ qty=7 .*confirmed=buyer/,
    );
    const found = [
      ...findLeaks("responses", bodies.join("\n"), all),
      ...findLeaks("stdout", server.stdout(), all),
      ...findLeaks("stderr", server.stderr(), all),
      ...files.flatMap((f) => findLeaks(f.path, f.text, all)),
    ];
    expect(found).toEqual([]);
  });
});
