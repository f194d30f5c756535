import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../src/config.js";
import { HttpStoreLinkClient } from "../../src/storelink/http.js";
import { createStoreLink } from "../../src/storelink/index.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";
import { loadEmulatorConfig } from "../../src/storelink-emulator.js";

describe("STORELINK_URL configuration", () => {
  it("uses the in-memory StoreLink when STORELINK_URL is unset or empty", () => {
    for (const env of [{}, { STORELINK_URL: "" }]) {
      const config = loadConfig(env);
      expect(config.storelinkUrl).toBeUndefined();
      expect(createStoreLink(config)).toBeInstanceOf(InMemoryStoreLink);
    }
  });

  it("uses the HTTP client when STORELINK_URL is set, with the timeout", () => {
    const config = loadConfig({
      STORELINK_URL: "http://127.0.0.1:8090",
      STORELINK_TIMEOUT_MS: "750",
    });
    expect(config.storelinkTimeoutMs).toBe(750);
    expect(createStoreLink(config)).toBeInstanceOf(HttpStoreLinkClient);
    expect(loadConfig({}).storelinkTimeoutMs).toBe(5000);
  });

  it("names the variable when a value is invalid", () => {
    expect(() => loadConfig({ STORELINK_URL: "not a url" })).toThrow(ConfigError);
    expect(() => loadConfig({ STORELINK_URL: "ftp://x" })).toThrow(/STORELINK_URL/);
    expect(() => loadConfig({ STORELINK_TIMEOUT_MS: "0" })).toThrow(/STORELINK_TIMEOUT_MS/);
  });

  it("accepts PORT=0 (any free port) for the server and the emulator", () => {
    expect(loadConfig({ PORT: "0" }).port).toBe(0);
    expect(loadEmulatorConfig({ PORT: "0" }).port).toBe(0);
    expect(loadEmulatorConfig({}).port).toBe(8090);
    expect(loadEmulatorConfig({ STORELINK_EMULATOR_CUT_AFTER_ORDERS: "2" }).cutAfterOrders).toBe(2);
    expect(() => loadEmulatorConfig({ PORT: "-1" })).toThrow(/PORT/);
    expect(loadEmulatorConfig({ STORELINK_EMULATOR_DROP_ORDERS: "3" }).dropOrders).toBe(3);
    expect(loadEmulatorConfig({ STORELINK_EMULATOR_LATE_ORDERS: "2:500" }).lateOrders).toEqual({
      count: 2,
      afterMs: 500,
    });
    expect(loadEmulatorConfig({}).lateOrders).toBeUndefined();
    expect(() => loadEmulatorConfig({ STORELINK_EMULATOR_LATE_ORDERS: "500" })).toThrow(
      /STORELINK_EMULATOR_LATE_ORDERS/,
    );
  });
});
