import { chmod, mkdir, mkdtemp, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FileKeyProvider } from "../../src/keys/file.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";
import { SEED_ACCEPTED_KEYS } from "../../src/storelink/seed.js";
import { validOrder } from "../helpers/arbitraries.js";
import { canaryKeys, findLeaks } from "../helpers/canary.js";
import { connect, errorOf, type Harness } from "../helpers/harness.js";
import { Gate, ScriptedStoreLink } from "../helpers/scripted-storelink.js";

/**
 * Faults in the key file, through the protocol with the real FileKeyProvider. Each gives the
 * documented outcome, and none puts key material (planted as canaries) into a result or trace.
 */

let dir: string;
let keysFile: string;
let h: Harness | undefined;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "korral-keyfault-"));
  keysFile = join(dir, "keys.json");
});
afterEach(async () => {
  await h?.close();
  h = undefined;
  await chmod(keysFile, 0o600).catch(() => {});
  await rm(dir, { recursive: true, force: true });
});

const CANARIES = canaryKeys(["47", "102", "111"]);
const stock = { sku: "8847291", store_ids: ["47", "102"] };

async function setUp(
  storelink = new ScriptedStoreLink(new InMemoryStoreLink({ acceptedKeys: CANARIES })),
) {
  h = await connect({ storelink, keys: new FileKeyProvider(keysFile) });
  return { ...h, storelink };
}

function expectNoCanary(h: Harness, ...texts: unknown[]): void {
  const all = JSON.stringify([texts, h.recorder.traces, h.recorder.audits]);
  expect(findLeaks("result/trace/audit", all, Object.values(CANARIES))).toEqual([]);
}

const COULD_NOT_READ = /^Could not read the StoreLink credentials for store 47\. Ask Korral IT/;

describe("key file faults", () => {
  it("missing: every store reports No credentials with the spec's message; no crash", async () => {
    const { call, recorder } = await setUp();
    const error = errorOf(await call("get_stock_position", stock));
    expect(error.type).toBe("no_credentials");
    expect(error.message).toContain(
      "store 47: No credentials for store 47. Ask Korral IT for access.",
    );
    const write = errorOf(await call("create_replenishment_order", validOrder()));
    expect(write.message).toBe("No credentials for store 47. Ask Korral IT for access.");
    expect(recorder.audits).toMatchObject([{ outcome: "REJECTED" }]);
  });

  it("malformed: the parser's message (which would quote the key) never surfaces", async () => {
    // The canary sits right next to the syntax error, where a parser's message would quote it.
    await writeFile(keysFile, `{"47": "${CANARIES["47"]}" "102": "${CANARIES["102"]}",, }`);
    const { call, storelink } = await setUp();
    const read = await call("get_stock_position", stock);
    expect(errorOf(read).type).toBe("no_credentials");
    expect(errorOf(read).message).toMatch(/Could not read the StoreLink credentials for store 47/);
    const write = await call("create_replenishment_order", validOrder());
    expect(errorOf(write).message).toMatch(COULD_NOT_READ);
    expect(storelink.attemptsOf("createOrder")).toBe(0);
    expectNoCanary(h as Harness, read, write);
  });

  it("an entry that is not a string (a nested canary) is an unreadable key, not echoed", async () => {
    await writeFile(
      keysFile,
      JSON.stringify({ "47": { value: CANARIES["47"] }, "102": CANARIES["102"] }),
    );
    const { call } = await setUp();
    const result = await call("get_stock_position", stock);
    expect(result.isError).toBeFalsy();
    const stores = (result.structuredContent as { stores: { store_id: string; status: string }[] })
      .stores;
    expect(stores).toMatchObject([
      { store_id: "47", status: "error" },
      { store_id: "102", status: "ok" },
    ]);
    expectNoCanary(h as Harness, result);
  });

  it("a directory where the file should be is unreadable: no_credentials, no crash", async () => {
    await mkdir(keysFile);
    const { call } = await setUp();
    expect(errorOf(await call("create_replenishment_order", validOrder())).message).toMatch(
      COULD_NOT_READ,
    );
    await rm(keysFile, { recursive: true });
  });

  // Root reads a mode-000 file anyway, so there the fault cannot be produced: skip, saying why.
  const isRoot = process.getuid?.() === 0;
  it.skipIf(isRoot)(
    "unreadable (chmod 000): no_credentials 'could not read', not 'no key' [skipped as root: root ignores file modes]",
    async () => {
      await writeFile(keysFile, JSON.stringify(CANARIES));
      await chmod(keysFile, 0o000);
      const { call } = await setUp();
      const result = await call("create_replenishment_order", validOrder());
      expect(errorOf(result).message).toMatch(COULD_NOT_READ);
      expectNoCanary(h as Harness, result);
    },
  );

  it("replaced mid-call by an atomic rename: the 401 reload reads the new file and succeeds", async () => {
    // The file holds a stale key; StoreLink accepts the new one.
    await writeFile(keysFile, JSON.stringify({ ...CANARIES, "47": "slk_47_stale" }));
    const gate = new Gate();
    const storelink = new ScriptedStoreLink(new InMemoryStoreLink({ acceptedKeys: CANARIES })).fail(
      "createOrder",
      { hang: gate },
    );
    const { call, recorder } = await setUp(storelink);
    const pending = call("create_replenishment_order", validOrder());
    // While the first attempt (with the stale key) is in flight, an operator rotates the file
    // the way a rotation script does: write a temp file, then rename over the old one.
    await expect.poll(() => storelink.attemptsOf("createOrder")).toBe(1);
    await writeFile(join(dir, "keys.next"), JSON.stringify(CANARIES));
    await rename(join(dir, "keys.next"), keysFile);
    gate.release();
    const result = await pending;
    expect(result.isError).toBeFalsy();
    expect(storelink.attemptsOf("createOrder")).toBe(2);
    expect(storelink.landed).toHaveLength(1);
    expect(recorder.audits).toMatchObject([{ outcome: "CREATED", order_id: "RPL-47-001" }]);
    expectNoCanary(h as Harness, result);
  });

  it("rotated between calls: the very next call uses the new key, with no restart", async () => {
    await writeFile(keysFile, JSON.stringify({ "47": "slk_47_stale" }));
    h = await connect({ keys: new FileKeyProvider(keysFile) });
    expect(errorOf(await h.call("create_replenishment_order", validOrder())).type).toBe(
      "auth_failed",
    );
    await writeFile(join(dir, "keys.next"), JSON.stringify(SEED_ACCEPTED_KEYS));
    await rename(join(dir, "keys.next"), keysFile);
    const result = await h.call("create_replenishment_order", validOrder());
    expect((result.structuredContent as { order_id: string }).order_id).toBe("RPL-47-001");
  });

  it("a key file larger than one read (thousands of stores) is read whole", async () => {
    // Stores 10000.. pad the file well past the reader's 16 KiB chunk; store 47 comes last.
    const many = Object.fromEntries(
      Array.from({ length: 3_000 }, (_, i) => [
        String(10_000 + i),
        `slk_pad_${i}_${"x".repeat(20)}`,
      ]),
    );
    const text = JSON.stringify({ ...many, "47": SEED_ACCEPTED_KEYS["47"] });
    expect(text.length).toBeGreaterThan(4 * 16 * 1024);
    await writeFile(keysFile, text);
    const key = await new FileKeyProvider(keysFile).getKey("47");
    expect(key?.reveal()).toBe(SEED_ACCEPTED_KEYS["47"]);
  });
});
