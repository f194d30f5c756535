import { describe, expect, it } from "vitest";
import {
  canonicalPrincipalId,
  clientPrincipal,
  labelProblem,
  localPrincipal,
  osPrincipal,
  PRINCIPAL_MAX_LENGTH,
  principalProblem,
  stdioPrincipal,
  svcPrincipal,
  userPrincipal,
} from "../../src/policy/principal.js";

/** Principals: one prefixed string each, checked once, canonical, and on stdio unverified. */

describe("principal ids", () => {
  it.each([
    "user:alice@korral.example",
    "svc:agent@korral-prod.iam.gserviceaccount.com",
    "client:reporting",
    "client:https://agent.korral.example/client.json",
    "os:alice@buyer-laptop.local",
    "local:alice",
    "local:alice.novak@korral",
  ])("%s is a principal", (id) => {
    expect(principalProblem(id)).toBeUndefined();
  });

  it.each([
    ["", /starts with user:, svc:, client:, os:, local:/],
    ["alice@korral.example", /starts with/],
    ["admin:alice", /starts with/],
    ["User:alice@korral.example", /starts with/],
    ["user:", /user: needs an e-mail address/],
    ["user:alice", /user: needs an e-mail address/],
    ["user:alice smith@korral.example", /e-mail/],
    ["user:alice@korral..example", /e-mail/],
    ["user:alice@-korral.example", /e-mail/],
    ['user:"alice"@korral.example', /e-mail/],
    ["svc:agent", /svc: needs an e-mail address/],
    ["client:", /client: needs a client id/],
    ["client:my client", /client id/],
    ['client:a"b', /client id/],
    ["client:a\\b", /client id/],
    [`client:${"a".repeat(256)}`, /client id/],
    ["os:alice", /os: needs <login>@<host>/],
    ["os:@host", /<login>@<host>/],
    ["os:al ice@host", /<login>@<host>/],
    ["local:", /local: needs a label/],
    ["local:-alice", /label/],
    ["local:alice smith", /label/],
    ["local:alice\n", /label/],
    [`local:${"a".repeat(65)}`, /label/],
    [`user:${"a".repeat(400)}@x`, new RegExp(`at most ${PRINCIPAL_MAX_LENGTH} characters`)],
  ])("%j is refused: %s", (id, problem) => {
    expect(principalProblem(id)).toMatch(problem);
  });

  it("a problem never quotes the id", () => {
    for (const id of ["user:CANARY smith@x", "CANARY", "local:CANARY!", "client:CANARY x"]) {
      expect(principalProblem(id)).not.toContain("CANARY");
    }
  });

  it("e-mail addresses (user:, svc:) and os: hosts are lower-cased; client ids and labels keep case", () => {
    expect(canonicalPrincipalId("user:Alice@Korral.Example")).toEqual({
      id: "user:alice@korral.example",
    });
    expect(canonicalPrincipalId("svc:Agent@P.iam.gserviceaccount.com")).toEqual({
      id: "svc:agent@p.iam.gserviceaccount.com",
    });
    expect(canonicalPrincipalId("os:Alice@Buyer-Laptop")).toEqual({ id: "os:Alice@buyer-laptop" });
    expect(canonicalPrincipalId("client:Reporting")).toEqual({ id: "client:Reporting" });
    expect(canonicalPrincipalId("local:Alice")).toEqual({ id: "local:Alice" });
  });
});

describe("constructors", () => {
  it("tokens give verified principals of their kind", () => {
    expect(userPrincipal("Alice@korral.example")).toEqual({
      id: "user:alice@korral.example",
      kind: "user",
      verified: true,
    });
    expect(svcPrincipal("agent@p.iam.gserviceaccount.com")).toMatchObject({
      kind: "svc",
      verified: true,
    });
    expect(clientPrincipal("reporting")).toEqual({
      id: "client:reporting",
      kind: "client",
      verified: true,
    });
  });

  it("a bad value throws, without quoting it", () => {
    expect(() => userPrincipal("not an address CANARY")).toThrow(/^Not a principal: user: needs/);
    expect(() => userPrincipal("not an address CANARY")).not.toThrow(/CANARY/);
    expect(() => clientPrincipal("")).toThrow(/client id/);
  });

  it("a local label is unverified", () => {
    expect(localPrincipal("alice")).toEqual({ id: "local:alice", kind: "local", verified: false });
  });
});

describe("the stdio principal", () => {
  const account = { login: "alice", host: "Buyer-Laptop.local" };

  it("is local:<label> when KORRAL_PRINCIPAL gave one, unverified", () => {
    expect(stdioPrincipal("alice.novak", account)).toEqual({
      id: "local:alice.novak",
      kind: "local",
      verified: false,
    });
  });

  it("is the OS account otherwise, unverified", () => {
    expect(stdioPrincipal(undefined, account)).toEqual({
      id: "os:alice@buyer-laptop.local",
      kind: "os",
      verified: false,
    });
  });

  it("any OS login and host still give a principal: characters it cannot carry are replaced", () => {
    expect(osPrincipal("DOMAIN\\Alice Novák", "PC 01.corp").id).toBe(
      "os:DOMAIN_Alice_Nov_k@pc-01.corp",
    );
    expect(osPrincipal("", "").id).toBe("os:unknown@unknown");
    expect(osPrincipal("a@b", "-.-..x-").id).toBe("os:a_b@x");
    expect(osPrincipal("x".repeat(100), `${"h".repeat(70)}.${"d".repeat(300)}`).id).toBe(
      `os:${"x".repeat(64)}@${"h".repeat(63)}.${"d".repeat(63)}`,
    );
  });

  it("KORRAL_PRINCIPAL's label rule", () => {
    expect(labelProblem("alice")).toBeUndefined();
    expect(labelProblem("alice@korral.example")).toBeUndefined();
    expect(labelProblem("local:alice")).toMatch(/becomes local:<label>/);
    expect(labelProblem("alice novak")).toMatch(/1 to 64 characters/);
    expect(labelProblem("a".repeat(65))).toMatch(/1 to 64 characters/);
    expect(labelProblem("_alice")).toMatch(/starting with a letter or digit/);
  });
});
