import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../src/config.js";
import { composeDeps } from "../../src/deps.js";
import { MapKeyProvider } from "../helpers/harness.js";

describe("write-safety configuration", () => {
  it("defaults: 10 minute dedupe window, 3 orders per hour, confirmation on", () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      dedupeWindowMs: 600_000,
      orderCapPerHour: 3,
      elicitConfirmation: true,
    });
  });

  it("reads the variables", () => {
    const config = loadConfig({
      KORRAL_DEDUPE_WINDOW_MIN: "0",
      KORRAL_ORDER_CAP_PER_HOUR: "0",
      KORRAL_ELICIT_CONFIRMATION: "off",
    });
    expect(config).toMatchObject({
      dedupeWindowMs: 0,
      orderCapPerHour: 0,
      elicitConfirmation: false,
    });
  });

  it.each([
    ["KORRAL_ORDER_CAP_PER_HOUR", "-1"],
    ["KORRAL_ORDER_CAP_PER_HOUR", "two"],
    ["KORRAL_DEDUPE_WINDOW_MIN", "-5"],
    ["KORRAL_ELICIT_CONFIRMATION", "maybe"],
  ])("names the variable when %s=%s is invalid", (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => loadConfig({ [name]: value })).toThrow(name);
  });

  it("composeDeps builds the guards from the environment", () => {
    const saved = { ...process.env };
    try {
      process.env.KORRAL_ORDER_CAP_PER_HOUR = "7";
      process.env.KORRAL_ELICIT_CONFIRMATION = "off";
      const deps = composeDeps({ keys: new MapKeyProvider() });
      expect(deps.orderCap?.perHour).toBe(7);
      expect(deps.confirmWrites).toBe(false);
    } finally {
      process.env = saved;
    }
  });
});
