import fc from "fast-check";
import { RedisClient } from "redis";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { configErrorOf } from "../helpers/config.js";
import { runToExit } from "../helpers/spawn.js";

/**
 * A KORRAL_REDIS_URL the Redis client cannot use stops the start (exit 2) naming the variable,
 * never quoting it; and a production start lists every missing or invalid variable at once.
 */

const PASSWORD = "Qz7-hunter2-secret-Xk";

describe("KORRAL_REDIS_URL: what the Redis client cannot use", () => {
  it.each([
    ["a /cache path", `rediss://:${PASSWORD}@10.0.0.3:6378/cache`],
    ["a bad %-escape in the password", `rediss://:${PASSWORD}%zz@10.0.0.3:6378`],
    ["a bad %-escape in the user", `redis://${PASSWORD}%E0%A4%A:pw@10.0.0.3:6379`],
    ["a fractional database", `redis://:${PASSWORD}@10.0.0.3:6379/1.5`],
    ["a negative database", `redis://:${PASSWORD}@10.0.0.3:6379/-1`],
    ["port 0", `redis://:${PASSWORD}@10.0.0.3:0`],
  ])(
    "%s: dist/http.js exits 2 with one line naming the variable, not its value",
    async (_what, url) => {
      const run = await runToExit("http.js", { KORRAL_REDIS_URL: url, KORRAL_LOG_FILES: "off" });
      expect(run.code).toBe(2);
      const lines = run.stderr.trimEnd().split("\n");
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/^Invalid configuration: KORRAL_REDIS_URL: /);
      expect(run.stderr + run.stdout).not.toContain("hunter2");
      expect(run.stderr).not.toContain("10.0.0.3");
    },
  );

  it("dist/stdio.js refuses it the same way, stdout untouched", async () => {
    const run = await runToExit("stdio.js", {
      KORRAL_REDIS_URL: `rediss://:${PASSWORD}@10.0.0.3:6378/cache`,
      KORRAL_LOG_FILES: "off",
    });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/KORRAL_REDIS_URL: the Redis client cannot use it/);
    expect(run.stderr).not.toContain("hunter2");
    expect(run.stdout).toBe("");
  });

  it("every URL the configuration accepts, the Redis client's own parser accepts too", () => {
    const piece = fc.constantFrom(
      "",
      "a",
      "%",
      "%2",
      "%zz",
      "%41",
      "%E0%A4%A",
      "%F0%9F%98%80",
      ":",
      "@",
      "0",
      "15",
      "-1",
      "1.5",
      "1e3",
      "0x10",
      "cache",
      "/",
      "?db=1",
      "#x",
      " ",
    );
    const word = fc.array(piece, { maxLength: 4 }).map((parts) => parts.join(""));
    const url = fc
      .record({
        scheme: fc.constantFrom("redis", "rediss", "http", "unix"),
        user: word,
        password: word,
        host: fc.constantFrom("10.0.0.3", "[::1]", "limits.internal", ""),
        port: fc.constantFrom("", ":6378", ":0", ":65535", ":65536", ":x"),
        path: word.map((w) => (w === "" ? "" : `/${w}`)),
      })
      .map(
        ({ scheme, user, password, host, port, path }) =>
          `${scheme}://${user}${password === "" ? "" : `:${password}`}${user || password ? "@" : ""}${host}${port}${path}`,
      );
    fc.assert(
      fc.property(url, (candidate) => {
        let accepted = true;
        try {
          loadConfig({ KORRAL_REDIS_URL: candidate });
        } catch {
          accepted = false;
        }
        if (!accepted) return;
        const parsed = RedisClient.parseURL(candidate) as {
          database?: number;
          socket: { port?: number };
        };
        if (parsed.database !== undefined) {
          expect(Number.isSafeInteger(parsed.database) && parsed.database >= 0).toBe(true);
        }
        if (parsed.socket.port !== undefined) expect(parsed.socket.port).toBeGreaterThan(0);
      }),
      { numRuns: 3000 },
    );
  });

  it("the usable shapes still load: a database number, no path, IPv6, a user", () => {
    for (const url of [
      "rediss://:p%40ss@10.0.0.3:6378",
      "rediss://:pass@10.0.0.3:6378/",
      "redis://:pass@10.0.0.3:6379/3",
      "redis://default:pass@[::1]:6379",
    ]) {
      expect(loadConfig({ KORRAL_REDIS_URL: url }).redisUrl).toBe(url);
    }
  });
});

describe("a production start names every problem at once", () => {
  it("loadConfig lists each missing or invalid variable in one message", () => {
    const message = configErrorOf({
      NODE_ENV: "production",
      PORT: "http",
      KORRAL_REDIS_URL: `rediss://:${PASSWORD}@10.0.0.3:6378/cache`,
      KORRAL_KEY_SOURCE: "secret-manager",
      KORRAL_ORDER_CAP_PER_HOUR: " ",
    });
    for (const name of [
      "PORT",
      "KORRAL_REDIS_URL",
      "GOOGLE_CLOUD_PROJECT",
      "STORELINK_URL",
      "KORRAL_ORDER_CAP_PER_HOUR",
    ]) {
      expect(message, name).toContain(`${name}:`);
    }
    expect(message).not.toContain("hunter2");
  });

  it("dist/http.js in production with nothing set: one line naming all three it requires", async () => {
    const run = await runToExit("http.js", { NODE_ENV: "production", KORRAL_LOG_FILES: "off" });
    expect(run.code).toBe(2);
    const lines = run.stderr.trimEnd().split("\n");
    expect(lines).toHaveLength(1);
    for (const name of ["STORELINK_URL", "KORRAL_REQUEST_STATE_KEY", "KORRAL_REDIS_URL"]) {
      expect(lines[0]).toContain(`${name}: required`);
    }
  });

  it("an invalid variable is named once, not also as missing", () => {
    const message = configErrorOf({ NODE_ENV: "production", STORELINK_URL: "ftp://x" });
    expect(message.match(/STORELINK_URL/g)).toHaveLength(1);
  });
});
