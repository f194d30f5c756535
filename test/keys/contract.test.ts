import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { FileKeyProvider } from "../../src/keys/file.js";
import { KeySourceError, type StoreKeyProvider } from "../../src/keys/provider.js";
import { SecretManagerKeyProvider } from "../../src/keys/secret-manager.js";
import { FakeSecretManager, grpcError } from "../helpers/fake-secret-manager.js";

/** What the contract needs from a key source: make a provider, change its keys, break it. */
interface Source {
  provider(options?: { cacheSeconds?: number }): StoreKeyProvider;
  setKey(storeId: string, value: string): Promise<void>;
  /** Makes the source fail in a way whose raw error text quotes `leak`. */
  breakWith(leak: string): Promise<void>;
  cleanup(): Promise<void>;
}

async function fileSource(): Promise<Source> {
  const dir = await mkdtemp(join(tmpdir(), "korral-keys-"));
  const path = join(dir, "keys.json");
  const keys: Record<string, string> = {};
  await writeFile(path, "{}");
  return {
    // The file provider has no cache at all: every option is satisfied by re-reading.
    provider: () => new FileKeyProvider(path),
    setKey: async (storeId, value) => {
      keys[storeId] = value;
      await writeFile(path, JSON.stringify(keys));
    },
    // Truncated JSON: the parser's message would quote the credentials around the error.
    breakWith: (leak) => writeFile(path, `{"47": "${leak}", "63": `),
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
}

async function secretManagerSource(): Promise<Source> {
  const fake = new FakeSecretManager();
  const name = (storeId: string) =>
    `projects/korral-test/secrets/storelink-key-${storeId}/versions/latest`;
  return {
    provider: (options = {}) =>
      new SecretManagerKeyProvider({
        client: fake,
        project: "korral-test",
        namePattern: "projects/{project}/secrets/storelink-key-{store}/versions/latest",
        cacheSeconds: options.cacheSeconds ?? 0,
      }),
    setKey: async (storeId, value) => {
      // Secret Manager hands payloads back as bytes.
      fake.secrets.set(name(storeId), new TextEncoder().encode(value));
    },
    breakWith: async (leak) => {
      fake.failWith = grpcError(
        7,
        `Permission 'secretmanager.versions.access' denied for resource '${name("47")}' ${leak}`,
      );
    },
    cleanup: async () => {},
  };
}

const SOURCES: [string, () => Promise<Source>][] = [
  ["FileKeyProvider", fileSource],
  ["SecretManagerKeyProvider", secretManagerSource],
];

describe.each(SOURCES)("StoreKeyProvider contract: %s", (_name, makeSource) => {
  let source: Source;
  afterEach(() => source?.cleanup());

  it("returns the key of a store that has one, trimmed, printing as a placeholder", async () => {
    source = await makeSource();
    await source.setKey("47", "  slk_47_present  \n");
    const key = await source.provider().getKey("47");
    expect(key?.reveal()).toBe("slk_47_present");
    expect(String(key)).toBe("[api key]");
  });

  it("returns undefined for a store without a key", async () => {
    source = await makeSource();
    await source.setKey("47", "slk_47_present");
    await expect(source.provider().getKey("128")).resolves.toBeUndefined();
  });

  it("returns undefined for an id that cannot name a key (no path tricks)", async () => {
    source = await makeSource();
    await source.setKey("47", "slk_47_present");
    await expect(source.provider().getKey("../47")).resolves.toBeUndefined();
    await expect(source.provider().getKey("47/versions/1")).resolves.toBeUndefined();
  });

  it("picks up a rotated key on the very next lookup", async () => {
    source = await makeSource();
    const provider = source.provider();
    await source.setKey("47", "slk_47_old");
    expect((await provider.getKey("47"))?.reveal()).toBe("slk_47_old");
    await source.setKey("47", "slk_47_new");
    expect((await provider.getKey("47"))?.reveal()).toBe("slk_47_new");
  });

  it("bypasses any cache on a fresh lookup (the reload after a 401)", async () => {
    source = await makeSource();
    const provider = source.provider({ cacheSeconds: 60 });
    await source.setKey("47", "slk_47_old");
    expect((await provider.getKey("47"))?.reveal()).toBe("slk_47_old");
    await source.setKey("47", "slk_47_new");
    expect((await provider.getKey("47", { fresh: true }))?.reveal()).toBe("slk_47_new");
  });

  it("reports a failing source as KeySourceError naming the store, without key material", async () => {
    source = await makeSource();
    await source.setKey("47", "slk_47_present");
    const leak = "slk_47_LEAKED_SECRET_VALUE";
    await source.breakWith(leak);
    const error = await source
      .provider()
      .getKey("47")
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(error).toBeInstanceOf(KeySourceError);
    const sourceError = error as KeySourceError;
    expect(sourceError.storeId).toBe("47");
    expect(sourceError.message).toContain("store 47");
    for (const text of [sourceError.message, sourceError.stack ?? "", JSON.stringify(error)]) {
      expect(text).not.toContain(leak);
      expect(text).not.toContain("slk_47_present");
    }
    expect(sourceError.cause).toBeUndefined();
  });
});
