import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { describe, expect, it } from "vitest";
import { KeySourceError } from "../../src/keys/provider.js";
import { SecretManagerKeyProvider } from "../../src/keys/secret-manager.js";
import { SEED_ACCEPTED_KEYS } from "../../src/storelink/seed.js";
import { FakeSecretManager, grpcError } from "../helpers/fake-secret-manager.js";
import { connect, errorOf } from "../helpers/harness.js";

const PATTERN = "projects/{project}/secrets/storelink-key-{store}/versions/latest";
const nameOf = (store: string) =>
  `projects/korral-prod/secrets/storelink-key-${store}/versions/latest`;

function setup(options: { cacheSeconds?: number; deadlineMs?: number } = {}) {
  const fake = new FakeSecretManager();
  let clock = 1_000_000;
  const provider = new SecretManagerKeyProvider({
    client: fake,
    project: "korral-prod",
    namePattern: PATTERN,
    now: () => clock,
    ...options,
  });
  return { fake, provider, advance: (ms: number) => (clock += ms) };
}

const failureOf = (promise: Promise<unknown>): Promise<KeySourceError> =>
  promise.then(
    () => {
      throw new Error("expected a KeySourceError");
    },
    (e: unknown) => {
      expect(e).toBeInstanceOf(KeySourceError);
      return e as KeySourceError;
    },
  );

describe("SecretManagerKeyProvider", () => {
  it("reads versions/latest of the store's secret, with a per-call deadline", async () => {
    const { fake, provider } = setup({ deadlineMs: 2500 });
    fake.secrets.set(nameOf("47"), "slk_47_string_payload\n");
    expect((await provider.getKey("47"))?.reveal()).toBe("slk_47_string_payload");
    expect(fake.calls).toEqual([{ name: nameOf("47"), options: { timeout: 2500 } }]);
  });

  it("applies a custom name pattern", async () => {
    const fake = new FakeSecretManager();
    fake.secrets.set("projects/p-123456/secrets/sl-63/versions/3", Buffer.from("slk_63_x"));
    const provider = new SecretManagerKeyProvider({
      client: fake,
      project: "p-123456",
      namePattern: "projects/{project}/secrets/sl-{store}/versions/3",
    });
    expect((await provider.getKey("63"))?.reveal()).toBe("slk_63_x");
  });

  it("never builds a resource name from an unsafe store id", async () => {
    const { fake, provider } = setup();
    for (const id of ["../47", "47/versions/1", "47 ", "", "4".repeat(33), "47%2F1"]) {
      await expect(provider.getKey(id)).resolves.toBeUndefined();
    }
    expect(fake.calls).toEqual([]);
  });

  it("re-reads on every lookup by default", async () => {
    const { fake, provider } = setup();
    fake.secrets.set(nameOf("47"), "slk_47_a");
    await provider.getKey("47");
    await provider.getKey("47");
    expect(fake.calls).toHaveLength(2);
  });

  it("with a cache: serves a present key until it expires, fresh always goes to the source", async () => {
    const { fake, provider, advance } = setup({ cacheSeconds: 30 });
    fake.secrets.set(nameOf("47"), "slk_47_old");
    await provider.getKey("47");
    fake.secrets.set(nameOf("47"), "slk_47_new");
    expect((await provider.getKey("47"))?.reveal()).toBe("slk_47_old");
    expect(fake.calls).toHaveLength(1);

    expect((await provider.getKey("47", { fresh: true }))?.reveal()).toBe("slk_47_new");
    expect(fake.calls).toHaveLength(2);

    fake.secrets.set(nameOf("47"), "slk_47_newer");
    advance(30_001);
    expect((await provider.getKey("47"))?.reveal()).toBe("slk_47_newer");
    expect(fake.calls).toHaveLength(3);
  });

  it("with a cache: absence is not cached, so a newly granted store works at once", async () => {
    const { fake, provider } = setup({ cacheSeconds: 30 });
    await expect(provider.getKey("128")).resolves.toBeUndefined();
    fake.secrets.set(nameOf("128"), "slk_128_granted");
    expect((await provider.getKey("128"))?.reveal()).toBe("slk_128_granted");
  });

  it("maps NOT_FOUND to no key", async () => {
    const { provider } = setup();
    await expect(provider.getKey("128")).resolves.toBeUndefined();
  });

  it.each([
    [7, "permission denied on the store's secret", false],
    [16, "not authenticated to Secret Manager", false],
    [9, "secret version is disabled or destroyed", false],
    [14, "Secret Manager unavailable", true],
    [8, "Secret Manager quota exhausted", true],
    [4, "Secret Manager deadline exceeded", true],
    [13, "Secret Manager request failed", true],
  ])(
    "maps gRPC code %i to a short category, never the gRPC text",
    async (code, reason, transient) => {
      const { fake, provider } = setup();
      fake.failWith = grpcError(code, `RAW_GRPC_DETAIL for ${nameOf("47")}`);
      const error = await failureOf(provider.getKey("47"));
      expect(error.reason).toBe(reason);
      expect(error.transient).toBe(transient);
      expect(error.message).toBe(`Key source failed for store 47: ${reason}`);
      expect(`${error.message}${error.stack}`).not.toContain("RAW_GRPC_DETAIL");
    },
  );

  it("bounds a hung call by the deadline", async () => {
    const { fake, provider } = setup({ deadlineMs: 100 });
    fake.hang = true;
    const error = await failureOf(provider.getKey("47"));
    expect(error.reason).toBe("no answer from Secret Manager within 100 ms");
    expect(error.transient).toBe(true);
  });

  it("treats an empty payload as a source failure, not as a key", async () => {
    const { fake, provider } = setup();
    fake.secrets.set(nameOf("47"), new Uint8Array(Buffer.from("  \n")));
    expect((await failureOf(provider.getKey("47"))).reason).toBe("secret payload is empty");
  });
});

describe("SecretManagerKeyProvider through the MCP protocol", () => {
  async function withSecrets(fake: FakeSecretManager) {
    const keys = new SecretManagerKeyProvider({
      client: fake,
      project: "korral-prod",
      namePattern: PATTERN,
    });
    return connect({ keys });
  }
  const stock = (h: Awaited<ReturnType<typeof withSecrets>>, stores: string[]) =>
    h.call("get_stock_position", { sku: "8847291", store_ids: stores });
  const entries = (result: CallToolResult) =>
    (result.structuredContent as { stores?: Record<string, unknown>[] }).stores ?? [];

  it("a store without a secret gets the spec's message; the others answer", async () => {
    const fake = new FakeSecretManager();
    for (const store of ["47", "102"]) {
      fake.secrets.set(nameOf(store), SEED_ACCEPTED_KEYS[store] ?? "");
    }
    const h = await withSecrets(fake);
    try {
      const result = await stock(h, ["47", "128"]);
      expect(result.isError).not.toBe(true);
      const text = JSON.stringify(result);
      expect(text).toContain("No credentials for store 128. Ask Korral IT for access.");
      expect(text).toContain('"on_hand":3');
      const allFail = await stock(h, ["128"]);
      expect(errorOf(allFail).message).toContain("No credentials for store 128");
      expect(entries(result)).toHaveLength(2);
    } finally {
      await h.close();
    }
  });

  it("PERMISSION_DENIED gives a per-store error with neither gRPC text nor key material", async () => {
    const fake = new FakeSecretManager();
    fake.failWith = grpcError(7, `Permission denied on ${nameOf("47")} slk_47_demo_7f3a91c2e5b8`);
    const h = await withSecrets(fake);
    try {
      const result = await stock(h, ["47"]);
      const error = errorOf(result);
      expect(error.type).toBe("no_credentials");
      expect(error.message).toContain("store 47");
      const text = JSON.stringify(result) + JSON.stringify(h.recorder.traces);
      expect(text).not.toContain("Permission denied on");
      expect(text).not.toContain("slk_47");
    } finally {
      await h.close();
    }
  });

  it("a Secret Manager outage is retryable for the model", async () => {
    const fake = new FakeSecretManager();
    fake.failWith = grpcError(14, "connect ECONNREFUSED");
    const h = await withSecrets(fake);
    try {
      const error = errorOf(await stock(h, ["47"]));
      expect(error.retryable).toBe(true);
      expect(JSON.stringify(error)).not.toContain("ECONNREFUSED");
    } finally {
      await h.close();
    }
  });
});
