import { describe, expect, it } from "vitest";
import { withStoreKey } from "../../src/auth.js";
import { ToolError } from "../../src/errors.js";
import type { ApiKey } from "../../src/keys/api-key.js";
import { StoreLinkError } from "../../src/storelink/client.js";
import { MapKeyProvider } from "../helpers/harness.js";

const unauthorized = () => new StoreLinkError("unauthorized", "401");

describe("withStoreKey: reload and retry once, only on a 401", () => {
  it("uses the key without a reload when it works", async () => {
    const keys = new MapKeyProvider({ "47": "good" });
    const seen: string[] = [];
    const result = await withStoreKey(keys, "47", async (key: ApiKey) => {
      seen.push(key.reveal());
      return "ok";
    });
    expect(result).toBe("ok");
    expect(seen).toEqual(["good"]);
    expect(keys.lookups).toEqual([{ storeId: "47", fresh: false }]);
  });

  it("reloads the key (fresh) after a 401 and succeeds with the rotated key", async () => {
    const keys = new MapKeyProvider({ "47": "stale" });
    const seen: string[] = [];
    const result = await withStoreKey(keys, "47", async (key) => {
      seen.push(key.reveal());
      if (key.reveal() === "stale") {
        keys.keys["47"] = "rotated"; // the operator rotates while the call is in flight
        throw unauthorized();
      }
      return "ok";
    });
    expect(result).toBe("ok");
    expect(seen).toEqual(["stale", "rotated"]);
    expect(keys.lookups.map((l) => l.fresh)).toEqual([false, true]);
  });

  it("stops after the second 401 with the spec's message: no third attempt", async () => {
    const keys = new MapKeyProvider({ "63": "stale" });
    let attempts = 0;
    const error = await withStoreKey(keys, "63", async () => {
      attempts++;
      throw unauthorized();
    }).catch((e: unknown) => e);
    expect(attempts).toBe(2);
    expect(error).toBeInstanceOf(ToolError);
    expect((error as ToolError).type).toBe("auth_failed");
    expect((error as ToolError).message).toBe(
      "Authentication failed for store 63 after key reload. If it still fails, retry shortly; if it keeps failing, contact Korral IT.",
    );
  });

  it.each(["outcome_unknown", "unavailable", "not_ranged", "unknown_sku"] as const)(
    "never retries a %s failure",
    async (kind) => {
      const keys = new MapKeyProvider({ "47": "good" });
      let attempts = 0;
      await expect(
        withStoreKey(keys, "47", async () => {
          attempts++;
          throw new StoreLinkError(kind, kind);
        }),
      ).rejects.toMatchObject({ kind });
      expect(attempts).toBe(1);
    },
  );

  it("reports no credentials, with the spec's message, when the store has no key", async () => {
    let attempts = 0;
    const error = await withStoreKey(new MapKeyProvider({}), "128", async () => {
      attempts++;
    }).catch((e: unknown) => e);
    expect(attempts).toBe(0);
    expect((error as ToolError).type).toBe("no_credentials");
    expect((error as ToolError).message).toBe(
      "No credentials for store 128. Ask Korral IT for access.",
    );
  });

  it("reports no credentials when the key disappears on reload", async () => {
    const keys = new MapKeyProvider({ "47": "stale" });
    const error = await withStoreKey(keys, "47", async () => {
      delete keys.keys["47"];
      throw unauthorized();
    }).catch((e: unknown) => e);
    expect((error as ToolError).type).toBe("no_credentials");
  });
});
