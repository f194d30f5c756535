import { existsSync } from "node:fs";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SEED_ACCEPTED_KEYS } from "../../src/storelink/seed.js";
import { HERO_REASON } from "../helpers/harness.js";
import { DIST, type Spawned, spawnProcess } from "../helpers/spawn.js";

let dir: string;
let child: Spawned | undefined;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "korral-spawn-"));
  await writeFile(join(dir, "keys.json"), JSON.stringify(SEED_ACCEPTED_KEYS));
});
afterEach(async () => {
  // Waits for the exit: a server still writing would race the rm below.
  await child?.kill();
  child = undefined;
  await rm(dir, { recursive: true, force: true });
});

function start(entry: string, env: Record<string, string>) {
  const run = spawnProcess(process.execPath, [join(DIST, entry)], {
    cwd: dir, // an arbitrary working directory, as MCP clients use
    env: { PATH: process.env.PATH ?? "", KORRAL_KEYS_FILE: join(dir, "keys.json"), ...env },
  });
  child = run;
  const out = {
    get stdout() {
      return run.stdout();
    },
    get stderr() {
      return run.stderr();
    },
  };
  return { proc: run.child, out, exited: run.exit };
}

async function until(predicate: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 400; i++) {
    if (predicate()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`timed out waiting for ${what}`);
}

const rpc = (id: number, method: string, params: unknown) =>
  `${JSON.stringify({ jsonrpc: "2.0", id, method, params })}\n`;

describe("stdio (built dist/stdio.js)", () => {
  it("writes nothing but JSON-RPC to stdout, and its logs to KORRAL_LOG_DIR", async () => {
    const logDir = join(dir, "logs");
    const { proc, out, exited } = start("stdio.js", { KORRAL_LOG_DIR: logDir, LOG_LEVEL: "debug" });
    proc.stdin?.write(
      rpc(1, "initialize", {
        protocolVersion: "2025-06-18",
        capabilities: {},
        clientInfo: { name: "t", version: "1" },
      }),
    );
    proc.stdin?.write(
      `${JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" })}\n`,
    );
    proc.stdin?.write(rpc(2, "tools/call", { name: "lookup_sku", arguments: { query: "butter" } }));
    proc.stdin?.write(
      rpc(3, "tools/call", {
        name: "create_replenishment_order",
        arguments: { store_id: "47", sku: "8847291", quantity: 24, reason: HERO_REASON },
      }),
    );
    proc.stdin?.write(
      rpc(4, "tools/call", {
        name: "create_replenishment_order",
        arguments: { store_id: "47", sku: "8847291", quantity: 24, reason: "tbd" },
      }),
    );
    await until(() => out.stdout.split("\n").length > 4, "four responses");
    proc.stdin?.end();
    expect(await exited).toBe(0);

    const frames = out.stdout.trimEnd().split("\n");
    expect(frames).toHaveLength(4);
    for (const frame of frames) expect(JSON.parse(frame)).toMatchObject({ jsonrpc: "2.0" });
    expect(out.stdout).not.toContain("log_type");

    const trace = (await readFile(join(logDir, "trace.jsonl"), "utf8")).trimEnd().split("\n");
    expect(trace.map((l) => JSON.parse(l).tool).sort()).toEqual([
      "create_replenishment_order",
      "create_replenishment_order",
      "lookup_sku",
    ]);
    const audit = (await readFile(join(logDir, "audit.log"), "utf8")).trimEnd().split("\n");
    // The two writes ran concurrently; either line may come first.
    expect(audit).toHaveLength(2);
    expect(audit).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/ CREATED RPL-47-001 store=47 /),
        expect.stringMatching(/ REJECTED - store=47 .* reason="tbd"$/),
      ]),
    );
    // Debug shows the configuration summary on stderr, never on stdout.
    expect(out.stderr).toContain("korral-storelink starting");
    expect(out.stderr).toContain(logDir);
  });

  it("answers normally when the log dir is a file, with one warning per file", async () => {
    const logDir = join(dir, "log-is-a-file");
    await writeFile(logDir, "");
    const { proc, out, exited } = start("stdio.js", { KORRAL_LOG_DIR: logDir });
    proc.stdin?.write(
      rpc(1, "initialize", {
        protocolVersion: "2025-06-18",
        capabilities: {},
        clientInfo: { name: "t", version: "1" },
      }),
    );
    for (let i = 2; i < 5; i++) {
      proc.stdin?.write(
        rpc(i, "tools/call", {
          name: "create_replenishment_order",
          arguments: { store_id: "47", sku: "8847291", quantity: i, reason: HERO_REASON },
        }),
      );
    }
    await until(() => out.stdout.split("\n").length > 4, "four responses");
    proc.stdin?.end();
    expect(await exited).toBe(0);
    const results = out.stdout
      .trimEnd()
      .split("\n")
      .slice(1)
      .map((l) => JSON.parse(l).result);
    expect(results.map((r) => r.structuredContent.order_id)).toEqual([
      "RPL-47-001",
      "RPL-47-002",
      "RPL-47-003",
    ]);
    const warnings = out.stderr.split("\n").filter((l) => l.includes("cannot write log file"));
    expect(warnings).toHaveLength(2);
    expect(warnings.some((w) => w.includes("audit.log"))).toBe(true);
    expect(warnings.some((w) => w.includes("trace.jsonl"))).toBe(true);
  });
});

describe("HTTP (built dist/http.js)", () => {
  it("emits structured trace/audit lines on stdout and Cloud Logging ops lines on stderr", async () => {
    const logDir = join(dir, "logs");
    const { proc, out, exited } = start("http.js", {
      PORT: "0",
      HOST: "127.0.0.1",
      KORRAL_LOG_DIR: logDir,
      KORRAL_LOG_FILES: "off",
      GOOGLE_CLOUD_PROJECT: "korral-test",
      LOG_LEVEL: "debug",
    });
    await until(() => out.stderr.includes("listening on HTTP"), "listening line");
    const listening = out.stderr
      .split("\n")
      .map((l) => JSON.parse(l || "{}") as Record<string, unknown>)
      .find((l) => l.message === "korral-storelink MCP server listening on HTTP");
    const port = Number(listening?.port);
    expect(port).toBeGreaterThan(0);

    const response = await fetch(`http://127.0.0.1:${port}/mcp`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "x-cloud-trace-context": `${"c".repeat(32)}/42;o=1`,
      },
      body: rpc(1, "tools/call", {
        name: "create_replenishment_order",
        arguments: { store_id: "47", sku: "8847291", quantity: 24, reason: HERO_REASON },
      }),
    });
    expect(response.status).toBe(200);
    await until(() => out.stdout.split("\n").length > 2, "two structured lines");
    await until(() => out.stderr.includes('"message":"http request"'), "access line");
    proc.kill("SIGTERM");
    expect(await exited).toBe(0);

    const stdout = out.stdout
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l));
    // Without files, the write's intent is an entry of its own before its outcome (intents.ts).
    expect(stdout.map((e) => [e.log_type, e.severity])).toEqual([
      ["intent", "NOTICE"],
      ["audit", "NOTICE"],
      ["trace", "INFO"],
    ]);
    expect(stdout[0].request_id).toBe(stdout[1].request_id);
    expect(stdout[1]["logging.googleapis.com/trace"]).toBe(
      `projects/korral-test/traces/${"c".repeat(32)}`,
    );
    const ops = out.stderr
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l));
    for (const line of ops) {
      expect(line).toHaveProperty("severity");
      expect(line).toHaveProperty("message");
      expect(line).not.toHaveProperty("msg");
    }
    const startup = ops.find((l) => l.message === "korral-storelink starting");
    expect(startup.config).toMatchObject({ transport: "http", log_files: false, log_stdout: true });
    expect(JSON.stringify(startup)).not.toContain("slk_");
    const access = ops.find((l) => l.message === "http request");
    expect(access).toMatchObject({
      severity: "DEBUG",
      httpRequest: { requestMethod: "POST", requestUrl: "/mcp", status: 200 },
      "logging.googleapis.com/trace": `projects/korral-test/traces/${"c".repeat(32)}`,
    });
    // Files switched off: nothing written.
    expect(existsSync(logDir) ? await readdir(logDir) : []).toEqual([]);
  });
});
