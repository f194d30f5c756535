import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { DEFAULT_SECRET_NAME_PATTERN, loadConfig } from "../../src/config.js";
import { FileKeyProvider } from "../../src/keys/file.js";
import { createKeyProvider } from "../../src/keys/index.js";
import { SecretManagerKeyProvider } from "../../src/keys/secret-manager.js";
import { configErrorOf } from "../helpers/config.js";
import { FakeSecretManager } from "../helpers/fake-secret-manager.js";
import { runProcess } from "../helpers/spawn.js";

describe("loadConfig: key source", () => {
  it("defaults to the key file, Secret Manager settings at their documented defaults", () => {
    const config = loadConfig({});
    expect(config.keySource).toBe("file");
    expect(config.secretManager).toEqual({
      project: undefined,
      namePattern: DEFAULT_SECRET_NAME_PATTERN,
      cacheSeconds: 0,
      deadlineMs: 3000,
    });
  });

  it("reads the Secret Manager settings", () => {
    const config = loadConfig({
      KORRAL_KEY_SOURCE: "secret-manager",
      GOOGLE_CLOUD_PROJECT: "korral-prod",
      KORRAL_SECRET_NAME_PATTERN: "projects/{project}/secrets/sl-{store}/versions/latest",
      KORRAL_KEY_CACHE_SECONDS: "30",
      KORRAL_KEY_DEADLINE_MS: "1500",
    });
    expect(config.keySource).toBe("secret-manager");
    expect(config.secretManager).toEqual({
      project: "korral-prod",
      namePattern: "projects/{project}/secrets/sl-{store}/versions/latest",
      cacheSeconds: 30,
      deadlineMs: 1500,
    });
  });

  it("Secret Manager without a project stops startup naming GOOGLE_CLOUD_PROJECT", () => {
    expect(configErrorOf({ KORRAL_KEY_SOURCE: "secret-manager" })).toContain(
      "GOOGLE_CLOUD_PROJECT",
    );
  });

  it("a pattern without {project} needs no project", () => {
    const config = loadConfig({
      KORRAL_KEY_SOURCE: "secret-manager",
      KORRAL_SECRET_NAME_PATTERN: "projects/123456/secrets/sl-{store}/versions/latest",
    });
    expect(config.secretManager.project).toBeUndefined();
  });

  it.each([
    ["KORRAL_KEY_SOURCE", "vault"],
    ["GOOGLE_CLOUD_PROJECT", "Korral Prod"],
    ["KORRAL_SECRET_NAME_PATTERN", "projects/p/secrets/storelink-key/versions/latest"],
    ["KORRAL_KEY_CACHE_SECONDS", "-1"],
    ["KORRAL_KEY_CACHE_SECONDS", "3600"],
    ["KORRAL_KEY_CACHE_SECONDS", "ten"],
    ["KORRAL_KEY_DEADLINE_MS", "0"],
    ["KORRAL_KEY_DEADLINE_MS", "120000"],
    ["PORT", "http"],
    ["PORT", "70000"],
  ])("a bad %s (%s) stops startup naming the variable", (name, value) => {
    expect(configErrorOf({ [name]: value })).toContain(`${name}:`);
  });
});

describe("createKeyProvider", () => {
  it("builds the file provider by default", async () => {
    const provider = await createKeyProvider(loadConfig({ KORRAL_KEYS_FILE: "/nowhere.json" }));
    expect(provider).toBeInstanceOf(FileKeyProvider);
  });

  it("builds the Secret Manager provider over the given client", async () => {
    const fake = new FakeSecretManager();
    fake.secrets.set("projects/korral-prod/secrets/storelink-key-47/versions/latest", "slk_47_sm");
    const config = loadConfig({
      KORRAL_KEY_SOURCE: "secret-manager",
      GOOGLE_CLOUD_PROJECT: "korral-prod",
    });
    const provider = await createKeyProvider(config, { secretClient: fake });
    expect(provider).toBeInstanceOf(SecretManagerKeyProvider);
    expect((await provider.getKey("47"))?.reveal()).toBe("slk_47_sm");
  });
});

/** Starts the built entry with `env` on top of a clean environment; resolves on exit. */
async function startBuilt(
  entry: string,
  env: Record<string, string>,
): Promise<{ code: number | null; stderr: string; stdout: string }> {
  const clean = Object.fromEntries(
    Object.entries(process.env).filter(
      ([k]) => !k.startsWith("KORRAL_") && !["PORT", "HOST", "GOOGLE_CLOUD_PROJECT"].includes(k),
    ),
  );
  const { code, stderr, stdout } = await runProcess(process.execPath, [entry], {
    // Logs outside the clone unless the case sets its own directory.
    env: { ...clean, KORRAL_LOG_DIR: join(tmpdir(), "korral-config-test-log"), ...env },
    stdin: "pipe",
    // If config validation ever stopped failing, the server would listen: stop it, fail below.
    timeoutMs: 15_000,
  });
  return { code, stderr, stdout };
}

describe("the built servers refuse bad configuration", () => {
  const httpEntry = join(import.meta.dirname, "../../dist/http.js");
  const stdioEntry = join(import.meta.dirname, "../../dist/stdio.js");

  it("dist/ is built (npm test builds first)", () => {
    expect(existsSync(httpEntry)).toBe(true);
  });

  it("HTTP: a bad PORT exits 2 with a message naming PORT", async () => {
    const logDir = await mkdtemp(join(tmpdir(), "korral-cfg-"));
    try {
      const run = await startBuilt(httpEntry, {
        PORT: "not-a-port",
        HOST: "127.0.0.1",
        KORRAL_LOG_DIR: logDir,
      });
      expect(run.code).toBe(2);
      expect(run.stderr).toContain("PORT:");
      expect(run.stderr).not.toMatch(/\n\s+at /); // a message, not a stack
    } finally {
      await rm(logDir, { recursive: true, force: true });
    }
  });

  it("HTTP: Secret Manager without a project exits 2 naming GOOGLE_CLOUD_PROJECT", async () => {
    const run = await startBuilt(httpEntry, {
      PORT: "1",
      KORRAL_KEY_SOURCE: "secret-manager",
    });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("GOOGLE_CLOUD_PROJECT");
  });

  it("HTTP: Secret Manager without Google credentials exits 2 instead of crashing later", async () => {
    // Regression: the library's unobserved stub promise rejected on the first lookup and the
    // unhandled rejection killed the server mid-call.
    const run = await startBuilt(httpEntry, {
      PORT: "1",
      KORRAL_KEY_SOURCE: "secret-manager",
      GOOGLE_CLOUD_PROJECT: "korral-prod",
      GOOGLE_APPLICATION_CREDENTIALS: "/nonexistent/adc.json",
    });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(
      "KORRAL_KEY_SOURCE: secret-manager needs Google Cloud credentials",
    );
  });

  it("stdio: a bad KORRAL_KEY_CACHE_SECONDS exits 2 naming it, stdout untouched", async () => {
    const run = await startBuilt(stdioEntry, { KORRAL_KEY_CACHE_SECONDS: "forever" });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("KORRAL_KEY_CACHE_SECONDS:");
    expect(run.stdout).toBe("");
  });
});
