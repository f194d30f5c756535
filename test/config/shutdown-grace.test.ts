import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../src/config.js";

describe("KORRAL_SHUTDOWN_GRACE_MS", () => {
  it("defaults to 8000 and can be set", () => {
    expect(loadConfig({}).shutdownGraceMs).toBe(8_000);
    expect(loadConfig({ KORRAL_SHUTDOWN_GRACE_MS: "250" }).shutdownGraceMs).toBe(250);
  });

  it.each(["-1", "1.5", "soon", "600001"])("refuses %s, naming the variable", (value) => {
    expect(() => loadConfig({ KORRAL_SHUTDOWN_GRACE_MS: value })).toThrow(ConfigError);
    expect(() => loadConfig({ KORRAL_SHUTDOWN_GRACE_MS: value })).toThrow(
      /KORRAL_SHUTDOWN_GRACE_MS/,
    );
  });
});
