import request from "supertest";
import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../src/config.js";
import { composeDeps } from "../../src/deps.js";
import { allowedHostsFor, createApp } from "../../src/http/app.js";
import { hostAllowedBy, hostPatternProblem } from "../../src/http/host-patterns.js";
import { MapKeyProvider, MemoryRecorder } from "../helpers/harness.js";

/**
 * KORRAL_ALLOWED_HOSTS as DEPLOYMENT.md sets it on Cloud Run: the service's two host names and
 * the tag form of each (`<tag>---<service label>`), plus a custom domain's sub-domains.
 */
const SERVICE_HOSTS = [
  "korral-storelink-abc123-lm.a.run.app",
  "*---korral-storelink-abc123-lm.a.run.app",
  "korral-storelink-123456789012.europe-central2.run.app",
  "*---korral-storelink-123456789012.europe-central2.run.app",
  "*.mcp.korral.example",
];
const allowed = hostAllowedBy(SERVICE_HOSTS);

describe("KORRAL_ALLOWED_HOSTS matching", () => {
  it.each([
    "korral-storelink-abc123-lm.a.run.app",
    "KORRAL-StoreLink-abc123-lm.A.RUN.APP",
    "korral-storelink-abc123-lm.a.run.app:443",
    "korral-storelink-abc123-lm.a.run.app.",
    "korral-storelink-abc123-lm.a.run.app.:8080",
    "candidate---korral-storelink-abc123-lm.a.run.app",
    "pr-42---korral-storelink-abc123-lm.a.run.app",
    "korral-storelink-123456789012.europe-central2.run.app",
    "candidate---korral-storelink-123456789012.europe-central2.run.app",
    "eu.mcp.korral.example",
    "EU.mcp.korral.example:8443",
  ])("accepts %s", (host) => {
    expect(allowed(host)).toBe(true);
  });

  it.each([
    // Other tenants' Cloud Run services and look-alikes.
    "evil.run.app",
    "xa.run.app",
    "a.run.app",
    "run.app",
    "evil-abc123-lm.a.run.app",
    "korral-storelink-abc123-lm.a.run.app.evil.example",
    "xkorral-storelink-abc123-lm.a.run.app",
    "korral-storelink-abc123-lm-a.run.app",
    // The tag form covers one label prefix only, never a dot or an empty tag.
    "---korral-storelink-abc123-lm.a.run.app",
    "evil.candidate---korral-storelink-abc123-lm.a.run.app",
    "candidate---evil---korral-storelink-abc123-lm.a.run.app.evil.example",
    "candidate--korral-storelink-abc123-lm.a.run.app",
    // The sub-domain pattern is never the bare domain, never a longer or look-alike name.
    "mcp.korral.example",
    "a.b.mcp.korral.example",
    "evilmcp.korral.example",
    "eu.mcp.korral.example.evil.example",
    // Trailing dots, ports and IPv6 that name something else; junk.
    "korral-storelink-abc123-lm.a.run.app..",
    "[::1]",
    "[2001:db8::1]:443",
    "127.0.0.2",
    "korral-storelink-abc123-lm.a.run.app@evil.example",
    "",
    ":443",
  ])("refuses %s", (host) => {
    expect(allowed(host)).toBe(false);
  });

  it("accepts an IPv6 entry written with or without brackets", () => {
    expect(hostAllowedBy(["2001:db8::1"])("[2001:db8::1]:8080")).toBe(true);
    expect(hostAllowedBy(["[2001:db8::1]"])("[2001:DB8::1]")).toBe(true);
    expect(hostAllowedBy(["2001:db8::1"])("[2001:db8::2]")).toBe(false);
  });
});

describe("KORRAL_ALLOWED_HOSTS validation", () => {
  it.each(SERVICE_HOSTS.concat(["localhost", "10.0.0.7", "mcp.korral.example:8443", "::1"]))(
    "accepts the entry %s",
    (entry) => {
      expect(hostPatternProblem(entry)).toBeUndefined();
    },
  );

  it.each([
    ["*", "too broad"],
    ["*.com", "too broad"],
    ["*.co.uk", "too broad"],
    ["*.run.app", "too broad"],
    ["*.a.run.app", "too broad"],
    ["*.europe-central2.run.app", "too broad"],
    ["*.appspot.com", "too broad"],
    ["*---a.run.app", "too broad"],
    ["*---run.app", "too broad"],
    ["*korral.example", "too broad"],
    [".run.app", "*.run.app"],
    [".korral.example", "*.korral.example"],
    ["mcp.*.korral.example", "in the middle"],
    ["*.*.korral.example", "not a host pattern"],
    ["*.korral.example:443", "not a host pattern"],
    ["https://mcp.korral.example/mcp", "not a host name"],
  ])("refuses %s (%s)", (entry, why) => {
    expect(hostPatternProblem(entry)).toContain(why);
  });

  it("stops startup naming the variable and the entry", () => {
    let message = "";
    try {
      loadConfig({ KORRAL_ALLOWED_HOSTS: "korral.example,*.run.app" });
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      message = (error as Error).message;
    }
    expect(message).toContain("KORRAL_ALLOWED_HOSTS");
    expect(message).toContain('"*.run.app" is too broad');
  });
});

describe("a tagged Cloud Run preview through the app", () => {
  const app = createApp(
    composeDeps({ keys: new MapKeyProvider(), recorder: new MemoryRecorder() }),
    {
      allowedHosts: allowedHostsFor(
        loadConfig({ HOST: "0.0.0.0", KORRAL_ALLOWED_HOSTS: SERVICE_HOSTS.join(",") }),
      ),
    },
  );
  const list = (host: string) =>
    request(app)
      .post("/mcp")
      .set("host", host)
      .set("accept", "application/json, text/event-stream")
      .set("content-type", "application/json")
      .send({ jsonrpc: "2.0", id: 1, method: "tools/list" });

  it("serves the tagged URL and refuses another tenant's", async () => {
    expect((await list("candidate---korral-storelink-abc123-lm.a.run.app")).status).toBe(200);
    expect((await list("korral-storelink-123456789012.europe-central2.run.app")).status).toBe(200);
    expect((await list("candidate---evil-abc123-lm.a.run.app")).status).toBe(403);
    expect((await list("evil.run.app")).status).toBe(403);
  });
});
