import { describe, expect, it } from "vitest";
import { tokenCache, tokenDigest } from "../../src/http/auth/token-cache.js";
import {
  clientPrincipal,
  kindOf,
  principal,
  principalOfEmail,
} from "../../src/policy/principal.js";

describe("principals: one string each, kinds that cannot collide", () => {
  it("a person, a Google service account, a client", () => {
    expect(principalOfEmail("Alice@Korral.example")).toBe("user:alice@korral.example");
    expect(principalOfEmail("agent@korral-prod.iam.gserviceaccount.com")).toBe(
      "svc:agent@korral-prod.iam.gserviceaccount.com",
    );
    expect(clientPrincipal("replenishment-agent")).toBe("client:replenishment-agent");
    expect(kindOf("svc:agent@x.iam.gserviceaccount.com")).toBe("svc");
  });

  it("a client whose id looks like an e-mail is still a client, never that person", () => {
    expect(clientPrincipal("alice@korral.example")).toBe("client:alice@korral.example");
    expect(clientPrincipal("alice@korral.example")).not.toBe(
      principalOfEmail("alice@korral.example"),
    );
  });

  it("is one log token: spaces, line breaks, % and non-ASCII are percent-encoded", () => {
    expect(clientPrincipal("a b\nc=d")).toBe("client:a%20b%0Ac=d");
    expect(clientPrincipal("100%")).toBe("client:100%25");
    expect(principalOfEmail("zoë@korral.example")).toBe("user:zo%C3%AB@korral.example");
    // Encoded, a spelling cannot pass for another principal: "%20" itself is kept apart.
    expect(clientPrincipal("a%20b")).not.toBe(clientPrincipal("a b"));
  });

  it("an empty value names nobody", () => {
    expect(principal("user", "")).toBeUndefined();
    expect(principalOfEmail("  ")).toBeUndefined();
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
