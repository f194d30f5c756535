import { describe, expect, it } from "vitest";
import { tokenCache, tokenDigest } from "../../src/http/auth/token-cache.js";
import { emailPrincipal } from "../../src/policy/principal.js";

describe("a verified token's e-mail: one rule for svc: and user:", () => {
  it("a Google service account is svc:, anyone else user:, both lower-cased", () => {
    expect(emailPrincipal("Agent@Korral-Prod.iam.gserviceaccount.com").id).toBe(
      "svc:agent@korral-prod.iam.gserviceaccount.com",
    );
    expect(emailPrincipal("Alice@Korral.example").id).toBe("user:alice@korral.example");
    // The domain decides, not a look-alike in the local part.
    expect(emailPrincipal("gserviceaccount.com@korral.example").id).toBe(
      "user:gserviceaccount.com@korral.example",
    );
  });
});

describe("the verified-token cache", () => {
  it("keeps an entry until the token's exp, and no longer", () => {
    let now = 1_000_000;
    const cache = tokenCache<string>(10, () => now);
    cache.set("token-a", "alice", 1_000 + 60);
    expect(cache.get("token-a")).toBe("alice");
    now = 1_059_999;
    expect(cache.get("token-a")).toBe("alice");
    now = 1_060_000;
    expect(cache.get("token-a")).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it("never keeps an expired token, and drops the oldest past its limit", () => {
    const cache = tokenCache<number>(3, () => 0);
    cache.set("expired", 0, 0);
    expect(cache.size).toBe(0);
    for (const n of [1, 2, 3, 4]) cache.set(`t${n}`, n, 100);
    expect(cache.size).toBe(3);
    expect(cache.get("t1")).toBeUndefined();
    expect(cache.get("t4")).toBe(4);
  });

  it("is keyed by the token's SHA-256: 43 base64url characters, not the token", () => {
    const token = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl";
    expect(tokenDigest(token)).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(tokenDigest(token)).not.toContain("eyJ");
  });
});
