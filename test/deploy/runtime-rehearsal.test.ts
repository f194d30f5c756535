import { type ChildProcess, execFile, spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { chmod, chown, cp, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SEED_ACCEPTED_KEYS } from "../../src/storelink/seed.js";
import { freePort } from "../helpers/spawn.js";

/**
 * Rehearses the Dockerfile's runtime stage without Docker: package.json + package-lock.json +
 * dist/ in an empty directory, `npm ci --omit=dev`, then `node dist/http.js` started and a tool
 * called over HTTP. A runtime dependency left in devDependencies fails here, as it would in the
 * image. When the tests run as root, the server runs as `nobody` over root-owned, read-only
 * files, as the image's `node` user does.
 */
const root = join(import.meta.dirname, "../..");
const run = promisify(execFile);
const NOBODY = 65534;
const SETPRIV = "/usr/bin/setpriv";

const asRoot = process.getuid?.() === 0;
const dropPrivileges = asRoot && existsSync(SETPRIV);

async function waitForHealth(base: string, child: ChildProcess, stderr: () => string) {
  for (let attempt = 0; attempt < 200; attempt++) {
    if (child.exitCode !== null) throw new Error(`server exited early:\n${stderr()}`);
    try {
      const res = await fetch(`${base}/healthz`);
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`server never became healthy:\n${stderr()}`);
}

describe("runtime stage rehearsal (production-only install, built server, one tool call)", () => {
  let work: string;
  let child: ChildProcess | undefined;
  let stderr = "";
  let base = "";

  beforeAll(async () => {
    expect(existsSync(join(root, "dist/http.js")), "npm test builds dist/ first").toBe(true);
    work = await mkdtemp(join(tmpdir(), "korral-runtime-"));
    const app = join(work, "app");
    await mkdir(app);
    // Exactly what the runtime stage receives: the manifests, then dist/ from the build stage.
    await cp(join(root, "package.json"), join(app, "package.json"));
    await cp(join(root, "package-lock.json"), join(app, "package-lock.json"));
    await run(
      "npm",
      ["ci", "--omit=dev", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
      { cwd: app, env: { ...process.env, NODE_ENV: "production" } },
    );
    await cp(join(root, "dist"), join(app, "dist"), { recursive: true });

    // Keys the seeded StoreLink accepts, so the call exercises key lookup end to end.
    const keysFile = join(work, "keys.json");
    await writeFile(keysFile, JSON.stringify(SEED_ACCEPTED_KEYS));
    const logDir = join(work, "log");
    await mkdir(logDir);
    if (dropPrivileges) {
      await chmod(work, 0o755); // mkdtemp makes it 0700; the code stays root-owned and read-only
      await chown(logDir, NOBODY, NOBODY);
    }

    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      NODE_ENV: "production",
      HOST: "127.0.0.1",
      PORT: String(port),
      KORRAL_KEYS_FILE: keysFile,
      KORRAL_LOG_DIR: logDir,
    };
    const command = dropPrivileges
      ? [SETPRIV, `--reuid=${NOBODY}`, `--regid=${NOBODY}`, "--clear-groups", process.execPath]
      : [process.execPath];
    const [file = "", ...prefix] = command;
    // As the image's CMD: node runs the entry directly, from the app directory.
    child = spawn(file, [...prefix, "dist/http.js"], { cwd: app, env, stdio: "pipe" });
    child.stderr?.on("data", (d) => (stderr += d));
    await waitForHealth(base, child, () => stderr);
  }, 300_000);

  afterAll(async () => {
    if (child && child.exitCode === null) {
      child.kill("SIGKILL");
    }
    if (work) await rm(work, { recursive: true, force: true });
  });

  it("installed no development dependency", () => {
    const modules = join(work, "app/node_modules");
    for (const dev of ["typescript", "vitest", "tsx", "@biomejs/biome", "supertest"]) {
      expect(existsSync(join(modules, dev)), dev).toBe(false);
    }
    expect(existsSync(join(modules, "@modelcontextprotocol/sdk"))).toBe(true);
  });

  it.runIf(dropPrivileges)("runs as a non-root user that cannot write its own code", async () => {
    const status = readFileSync(`/proc/${child?.pid}/status`, "utf8");
    expect(status).toMatch(new RegExp(`^Uid:\\s+${NOBODY}\\s`, "m"));
    const asNobody = [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, "--clear-groups", "test"];
    const can = (flag: string, path: string) =>
      run(SETPRIV, [...asNobody, flag, path]).then(
        () => true,
        () => false,
      );
    expect(await can("-r", join(work, "app/dist/http.js"))).toBe(true);
    expect(await can("-w", join(work, "app/dist/http.js"))).toBe(false);
    expect(await can("-w", join(work, "app/node_modules"))).toBe(false);
  });

  it("answers a tools/call over HTTP with live stock for a store whose key it read", async () => {
    const res = await fetch(`${base}/mcp`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
      },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "tools/call",
        params: { name: "get_stock_position", arguments: { sku: "8847291", store_ids: ["47"] } },
      }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as {
      result?: { isError?: boolean; structuredContent?: unknown };
    };
    expect(body.result?.isError).not.toBe(true);
    expect(JSON.stringify(body.result?.structuredContent)).toContain('"on_hand":3');
  });

  it("decodes a UTF-16 body (iconv-lite, kept out of the bundle, loads from node_modules)", async () => {
    const res = await fetch(`${base}/mcp`, {
      method: "POST",
      headers: {
        "content-type": "application/json; charset=utf-16le",
        accept: "application/json, text/event-stream",
      },
      body: Buffer.from(JSON.stringify({ jsonrpc: "2.0", id: 2, method: "ping" }), "utf16le"),
    });
    // Decoded by body-parser through iconv-lite; without it, this is a 500.
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ jsonrpc: "2.0", id: 2, result: {} });
  });

  it("stops cleanly on SIGTERM (what Cloud Run sends to PID 1)", async () => {
    const proc = child as ChildProcess;
    const exited = new Promise<number | null>((resolve) =>
      proc.once("exit", (code) => resolve(code)),
    );
    proc.kill("SIGTERM");
    expect(await exited).toBe(0);
    expect(stderr).not.toMatch(/Cannot find (module|package)/);
  });
});
