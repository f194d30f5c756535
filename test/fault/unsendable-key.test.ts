import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer as createNetServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inspect } from "node:util";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ApiKey } from "../../src/keys/api-key.js";
import { FileKeyProvider } from "../../src/keys/file.js";
import type { KeySourceError } from "../../src/keys/provider.js";
import { UnusableKeyError } from "../../src/keys/provider.js";
import { SecretManagerKeyProvider } from "../../src/keys/secret-manager.js";
import { OrderCap } from "../../src/policy/order-cap.js";
import { StoreLinkError } from "../../src/storelink/client.js";
import { HttpStoreLinkClient } from "../../src/storelink/http.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";
import { SEED_ACCEPTED_KEYS } from "../../src/storelink/seed.js";
import { type RunningEmulator, startEmulator } from "../../src/storelink-emulator.js";
import { validOrder } from "../helpers/arbitraries.js";
import { FakeSecretManager } from "../helpers/fake-secret-manager.js";
import { connect, errorOf, type Harness } from "../helpers/harness.js";
import { captureOpsLog } from "../helpers/ops-log.js";

/**
 * A key that cannot travel in an HTTP header (the recipe: a key in keys.json ending in U+2011, or
 * holding a line break or NUL, with STORELINK_URL set). fetch throws before connecting, so
 * nothing reaches StoreLink: the call is a credentials error naming the store, REJECTED, not
 * retryable, never "may have landed", and it does not fill the hourly cap.
 */

const GOOD = SEED_ACCEPTED_KEYS["47"] as string;
const MARK = "c0ffee";
/** Each holds MARK, so a message that quotes the key is caught. */
const UNSENDABLE: [string, string][] = [
  ["ending in U+2011", `${GOOD}${MARK}\u2011`],
  ["with a line break inside", `${GOOD}${MARK}\nX-Other: 1`],
  ["with a NUL", `${GOOD}${MARK}\u0000`],
  ["with a CR inside", `${GOOD}${MARK}\rx`],
  ["with a space inside", `${GOOD} ${MARK}`],
  ["with Latin-1 (é)", `${GOOD}${MARK}é`],
  ["with a DEL", `${GOOD}${MARK}\u007f`],
];

/** The emulator's StoreLink, counting what reached it (store-scoped calls). */
class Counting extends InMemoryStoreLink {
  reached = 0;
  landed = 0;
  override async getStock(...args: Parameters<InMemoryStoreLink["getStock"]>) {
    this.reached += 1;
    return super.getStock(...args);
  }
  override async createOrder(...args: Parameters<InMemoryStoreLink["createOrder"]>) {
    this.reached += 1;
    const created = await super.createOrder(...args);
    if (!created.replayed) this.landed += 1;
    return created;
  }
}

let dir: string;
let emulator: RunningEmulator | undefined;
let h: Harness | undefined;
let ops: ReturnType<typeof captureOpsLog>;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "korral-badkey-"));
  ops = captureOpsLog();
});
afterEach(async () => {
  await h?.close();
  await emulator?.close();
  h = undefined;
  emulator = undefined;
  ops.restore();
  await rm(dir, { recursive: true, force: true });
});

const keysFileWith = async (keys: Record<string, string>): Promise<string> => {
  const path = join(dir, "keys.json");
  await writeFile(path, JSON.stringify(keys));
  return path;
};

async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof Error) return error;
  }
  throw new Error("expected a rejection");
}

const textOf = (error: Error) =>
  `${error.message} ${error.stack} ${inspect(error, { depth: 10 })} ${JSON.stringify(error)}`;

describe("key sources refuse a key a header cannot carry", () => {
  it.each(UNSENDABLE)(
    "keys.json entry %s: a bad key file entry, key not quoted",
    async (_l, bad) => {
      const keys = new FileKeyProvider(await keysFileWith({ "47": bad, "102": `  ${GOOD}\n` }));
      const error = await rejection(keys.getKey("47"));
      expect(error).toBeInstanceOf(UnusableKeyError);
      expect(error).toMatchObject({ storeId: "47", transient: false });
      expect((error as KeySourceError).reason).toMatch(/^key file entry is not a usable key/);
      expect(textOf(error)).not.toContain(MARK);
      // Other stores are unaffected; whitespace around a key (a trailing newline) is trimmed.
      expect((await keys.getKey("102"))?.reveal()).toBe(GOOD);
    },
  );

  it.each(UNSENDABLE)("Secret Manager payload %s: a bad key, key not quoted", async (_l, bad) => {
    const fake = new FakeSecretManager();
    fake.secrets.set("projects/p/secrets/k-47/versions/latest", `${bad}\n`);
    const keys = new SecretManagerKeyProvider({
      client: fake,
      project: "p",
      namePattern: "projects/{project}/secrets/k-{store}/versions/latest",
    });
    const error = await rejection(keys.getKey("47"));
    expect(error).toBeInstanceOf(UnusableKeyError);
    expect(error).toMatchObject({ storeId: "47", transient: false });
    expect(textOf(error)).not.toContain(MARK);
    expect(ops.text()).toContain("secret payload is not a usable key");
    expect(ops.text()).not.toContain(MARK);
  });
});

describe("with STORELINK_URL set: a create with such a key", () => {
  it.each(UNSENDABLE)(
    "key %s: no_credentials naming the store, REJECTED, nothing sent, cap not filled",
    async (_l, bad) => {
      const storelink = new Counting();
      emulator = await startEmulator({ storelink });
      const keysFile = await keysFileWith({ "47": bad });
      h = await connect({
        storelink: new HttpStoreLinkClient({ baseUrl: emulator.url }),
        keys: new FileKeyProvider(keysFile),
        orderCap: new OrderCap({ perHour: 3 }),
      });
      for (let i = 0; i < 4; i++) {
        const error = errorOf(await h.call("create_replenishment_order", validOrder("47")));
        expect(error).toMatchObject({ type: "no_credentials", retryable: false });
        expect(error.message).toContain("store 47");
        expect(error.message).toContain("nothing was sent");
        expect(JSON.stringify(error)).not.toContain(MARK);
      }
      expect(h.recorder.audits.map((a) => a.outcome)).toEqual(Array(4).fill("REJECTED"));
      // Nothing reached StoreLink: no stock read, no order.
      expect(storelink.reached).toBe(0);
      // The cap was not touched: with the key fixed, three orders go through.
      await keysFileWith({ "47": GOOD });
      for (const quantity of [1, 2, 3]) {
        const result = await h.call("create_replenishment_order", {
          ...validOrder("47"),
          quantity,
        });
        expect(result.isError).toBeUndefined();
      }
      expect(storelink.landed).toBe(3);
      expect(JSON.stringify(h.recorder.traces)).not.toContain(MARK);
      expect(ops.text()).not.toContain(MARK);
    },
  );
});

describe("HttpStoreLinkClient never sends, or calls 'sent', a request fetch refused to build", () => {
  /** A loopback listener counting connections: it must see none. */
  async function countingServer() {
    let connections = 0;
    const server = createNetServer((socket) => {
      connections += 1;
      socket.destroy();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as { port: number };
    return {
      url: `http://127.0.0.1:${port}`,
      connections: () => connections,
      close: () => new Promise<void>((resolve) => server.close(() => resolve())),
    };
  }

  it.each(UNSENDABLE)(
    "a key %s handed straight to the client: a credentials error, no connection",
    async (_l, bad) => {
      const server = await countingServer();
      try {
        const client = new HttpStoreLinkClient({ baseUrl: server.url });
        const key = new ApiKey(bad);
        const write = await rejection(client.createOrder(validOrder("47"), key));
        expect(write).toBeInstanceOf(UnusableKeyError);
        expect(write).toMatchObject({ storeId: "47" });
        expect(textOf(write)).not.toContain(MARK);
        const read = await rejection(client.getStock("47", "8847291", key));
        expect(read).toBeInstanceOf(UnusableKeyError);
        expect(server.connections()).toBe(0);
      } finally {
        await server.close();
      }
    },
  );

  it("a TypeError from fetch while building the request is 'not sent', and its text is dropped", async () => {
    const client = new HttpStoreLinkClient({
      baseUrl: "http://127.0.0.1:9",
      // As undici words it: the message quotes the offending header value.
      fetch: () =>
        Promise.reject(
          new TypeError(`Headers.append: "${GOOD}${MARK}" is an invalid header value.`),
        ),
    });
    const error = await rejection(client.createOrder(validOrder("47"), new ApiKey(GOOD)));
    expect(error).toBeInstanceOf(StoreLinkError);
    expect((error as StoreLinkError).kind).toBe("unavailable");
    expect(textOf(error)).not.toContain(MARK);

    // fetch's network failure, TypeError "fetch failed", may come after sending: still unknown.
    const after = new HttpStoreLinkClient({
      baseUrl: "http://127.0.0.1:9",
      fetch: () =>
        Promise.reject(
          new TypeError("fetch failed", {
            cause: Object.assign(new Error("x"), { code: "ECONNRESET" }),
          }),
        ),
    });
    const lost = await rejection(after.createOrder(validOrder("47"), new ApiKey(GOOD)));
    expect((lost as StoreLinkError).kind).toBe("outcome_unknown");
  });
});
