import { describe, expect, it } from "vitest";
import { CLOUD_RUN_MAX_GRACE_MS, loadConfig } from "../../src/config.js";
import { allowedHostsFor } from "../../src/http/app.js";
import {
  hostPatternProblem,
  isLoopbackHost,
  LOOPBACK_HOSTS,
} from "../../src/http/host-patterns.js";
import { configErrorOf } from "../helpers/config.js";

/** Settings an unlucky operator writes: each refused at start, or read as it is meant. */

describe("a setting of only whitespace is refused, never read as 0 or as unset", () => {
  it.each([
    "KORRAL_ORDER_CAP_PER_HOUR",
    "KORRAL_RATE_LIMIT_PER_MIN",
    "KORRAL_SHUTDOWN_GRACE_MS",
    "PORT",
    "KORRAL_KEYS_FILE",
    "KORRAL_ALLOWED_HOSTS",
    "KORRAL_REQUEST_STATE_KEY",
  ])("%s", (name) => {
    for (const blank of [" ", "\t", "  \n ", "\u00a0"]) {
      const message = configErrorOf({ [name]: blank });
      expect(message).toContain(`${name}: is only whitespace`);
    }
  });

  it("an empty value is still unset (the deployment tools' convention)", () => {
    expect(loadConfig({ KORRAL_ORDER_CAP_PER_HOUR: "" }).orderCapPerHour).toBe(3);
  });

  it("whitespace in a variable the server does not read is none of its business", () => {
    expect(() => loadConfig({ SOME_OTHER_TOOL: " " })).not.toThrow();
  });
});

describe("host patterns are judged as a Host header is matched", () => {
  it.each(["*.com.", "*.run.app.", "*.co.uk.", "*.", "*.a.run.app."])(
    "%s is too broad",
    (entry) => {
      expect(hostPatternProblem(entry)).toMatch(/too broad|not a host/);
      expect(configErrorOf({ KORRAL_ALLOWED_HOSTS: entry })).toContain("KORRAL_ALLOWED_HOSTS");
    },
  );

  it("a trailing dot on a fine entry is fine", () => {
    expect(hostPatternProblem("korral-storelink-abc123-lm.a.run.app.")).toBeUndefined();
    expect(hostPatternProblem("*.korral.example.")).toBeUndefined();
  });
});

describe("DNS-rebinding protection whenever the listen address is loopback", () => {
  it.each([
    "127.0.0.1",
    "127.0.0.2",
    "127.255.255.254",
    "127.1",
    "0x7f.0.0.1",
    "2130706433",
    "::1",
    "[::1]",
    "0:0:0:0:0:0:0:1",
    "0000:0000:0000:0000:0000:0000:0000:0001",
    "::ffff:127.0.0.1",
    "::ffff:7f00:1",
    "localhost",
    "LOCALHOST",
    "localhost.",
  ])("%s is loopback: Host is checked", (host) => {
    expect(isLoopbackHost(host)).toBe(true);
    expect(allowedHostsFor({ host, allowedHosts: [] })).toEqual(LOOPBACK_HOSTS);
  });

  it.each(["0.0.0.0", "::", "10.0.0.1", "128.0.0.1", "::2", "::ffff:10.0.0.1", "example.com"])(
    "%s is not loopback",
    (host) => {
      expect(isLoopbackHost(host)).toBe(false);
    },
  );
});

describe("the shutdown grace fits Cloud Run", () => {
  it("over 9000 ms is refused on Cloud Run (K_SERVICE set), saying why", () => {
    const message = configErrorOf({
      K_SERVICE: "korral-storelink",
      KORRAL_SHUTDOWN_GRACE_MS: "9001",
    });
    expect(message).toContain("KORRAL_SHUTDOWN_GRACE_MS: at most 9000 on Cloud Run");
    expect(
      loadConfig({
        K_SERVICE: "korral-storelink",
        KORRAL_SHUTDOWN_GRACE_MS: String(CLOUD_RUN_MAX_GRACE_MS),
      }).shutdownGraceMs,
    ).toBe(9000);
  });

  it("elsewhere a longer grace is allowed (a desktop's slow StoreLink)", () => {
    expect(loadConfig({ KORRAL_SHUTDOWN_GRACE_MS: "60000" }).shutdownGraceMs).toBe(60000);
  });
});
