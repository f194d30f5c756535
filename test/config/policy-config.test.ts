import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { configErrorOf } from "../helpers/config.js";

/** The store policy's source and the stdio principal, as the environment gives them. */

describe("the store policy's settings", () => {
  it("none by default: no policy source, a 10 s cache, no label", () => {
    const config = loadConfig({});
    expect(config.policy).toEqual({ source: undefined, cacheSeconds: 10 });
    expect(config.principalLabel).toBeUndefined();
  });

  it("KORRAL_POLICY_FILE is a file source", () => {
    expect(loadConfig({ KORRAL_POLICY_FILE: "/etc/korral/policy.json" }).policy.source).toEqual({
      kind: "file",
      path: "/etc/korral/policy.json",
    });
  });

  it("KORRAL_POLICY_SECRET as a secret id is its latest version in GOOGLE_CLOUD_PROJECT", () => {
    const config = loadConfig({
      KORRAL_POLICY_SECRET: "storelink-policy",
      GOOGLE_CLOUD_PROJECT: "korral-prod",
    });
    expect(config.policy.source).toEqual({
      kind: "secret",
      name: "projects/korral-prod/secrets/storelink-policy/versions/latest",
    });
  });

  it("KORRAL_POLICY_SECRET as a version's full name is used as given, no project needed", () => {
    const name = "projects/123456789/secrets/storelink-policy/versions/7";
    expect(loadConfig({ KORRAL_POLICY_SECRET: name }).policy.source).toEqual({
      kind: "secret",
      name,
    });
  });

  it("a secret id without GOOGLE_CLOUD_PROJECT stops the start, naming both", () => {
    expect(configErrorOf({ KORRAL_POLICY_SECRET: "storelink-policy" })).toMatch(
      /GOOGLE_CLOUD_PROJECT: required when KORRAL_POLICY_SECRET is a secret id/,
    );
  });

  it.each([
    "storelink policy",
    "projects/p/secrets/x",
    "projects/korral-prod/secrets/a/b/versions/latest",
    "projects/korral-prod/secrets/x/versions/0",
    "../x",
  ])("KORRAL_POLICY_SECRET=%j is refused", (value) => {
    expect(
      configErrorOf({ KORRAL_POLICY_SECRET: value, GOOGLE_CLOUD_PROJECT: "korral-prod" }),
    ).toMatch(/KORRAL_POLICY_SECRET: must be a secret id/);
  });

  it("both sources at once stop the start", () => {
    expect(
      configErrorOf({
        KORRAL_POLICY_FILE: "/p.json",
        KORRAL_POLICY_SECRET: "storelink-policy",
        GOOGLE_CLOUD_PROJECT: "korral-prod",
      }),
    ).toMatch(/KORRAL_POLICY_FILE and KORRAL_POLICY_SECRET are both set/);
  });

  it("KORRAL_POLICY_CACHE_SECONDS: 0 to 300", () => {
    expect(loadConfig({ KORRAL_POLICY_CACHE_SECONDS: "0" }).policy.cacheSeconds).toBe(0);
    expect(loadConfig({ KORRAL_POLICY_CACHE_SECONDS: "300" }).policy.cacheSeconds).toBe(300);
    expect(configErrorOf({ KORRAL_POLICY_CACHE_SECONDS: "301" })).toMatch(
      /KORRAL_POLICY_CACHE_SECONDS/,
    );
    expect(configErrorOf({ KORRAL_POLICY_CACHE_SECONDS: "-1" })).toMatch(
      /KORRAL_POLICY_CACHE_SECONDS/,
    );
  });
});

describe("KORRAL_PRINCIPAL", () => {
  it("a label is kept", () => {
    expect(loadConfig({ KORRAL_PRINCIPAL: "alice.novak@korral" }).principalLabel).toBe(
      "alice.novak@korral",
    );
  });

  it.each(["local:alice", "alice novak", "-alice", "a".repeat(65), "alice\u2028"])(
    "%j stops the start with the label rule, not repeating the value",
    (label) => {
      const message = configErrorOf({ KORRAL_PRINCIPAL: label });
      expect(message).toMatch(/KORRAL_PRINCIPAL: must be 1 to 64 characters/);
      expect(message).not.toContain(label);
    },
  );
});
