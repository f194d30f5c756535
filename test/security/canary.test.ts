import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FileKeyProvider } from "../../src/keys/file.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";
import { SEED_ACCEPTED_KEYS } from "../../src/storelink/seed.js";
import { validOrder } from "../helpers/arbitraries.js";
import { canaryKeys, filesUnder, findLeaks } from "../helpers/canary.js";
import { connect } from "../helpers/harness.js";
import { EVERY_PATH } from "../helpers/paths.js";
import { MCP_HEADERS, toolCall } from "../helpers/rpc.js";
import { ScriptedStoreLink } from "../helpers/scripted-storelink.js";
import { DIST, freePort, spawnDist, stdioTransport, waitForHealthy } from "../helpers/spawn.js";

/**
 * Secrets canary: unguessable keys are planted in the keys file, every path (each success,
 * each failure, a malformed key file) is driven through the protocol and through the built
 * servers, and everything they emit (results, stdout, stderr, every file in the log dir) is
 * searched for the canaries, raw and encoded (base64 at every alignment, base64url, hex).
 */

// 47 holds the real seed key so the success paths run in the spawned servers; 63/102/111 hold
// canaries StoreLink rejects (the key is read, presented, refused, reloaded: the likeliest leak
// path); 128 is absent; 999 is a canary for a store that does not exist.
const CANARIES = canaryKeys(["63", "102", "111", "999"]);
const CANARY_VALUES = Object.values(CANARIES);
const SPAWNED_KEYS = { ...CANARIES, "47": SEED_ACCEPTED_KEYS["47"] as string };
const MALFORMED = `{"47": "${CANARIES["63"]}" "102": "${CANARIES["102"]}",, oops }`;

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "korral-canary-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Writes the keys file in one of the two states the runs cycle through. */
async function writeKeys(path: string, state: "valid" | "malformed"): Promise<void> {
  await writeFile(path, state === "valid" ? JSON.stringify(SPAWNED_KEYS) : MALFORMED);
}

describe("secrets canary", () => {
  it("in process: no canary in any result, trace or audit record, on any path", async () => {
    const keysFile = join(dir, "inprocess.json");
    // Here StoreLink accepts the canaries, so the successes run with canary keys too.
    const accepted = canaryKeys(["47", "102", "111", "128"]);
    const all = [...Object.values(accepted), ...CANARY_VALUES];
    await writeFile(keysFile, JSON.stringify({ ...accepted, "63": CANARIES["63"] }));
    const storelink = new ScriptedStoreLink(new InMemoryStoreLink({ acceptedKeys: accepted }));
    const h = await connect({ storelink, keys: new FileKeyProvider(keysFile) });
    const outputs: unknown[] = [];
    const drive = async () => {
      for (const call of EVERY_PATH) {
        outputs.push(await h.call(call.name, call.arguments).catch((e: unknown) => String(e)));
      }
    };
    await drive();
    // Every StoreLink failure kind on the write, and a crash whose text names the key.
    storelink.fail(
      "createOrder",
      { kind: "unavailable" },
      { after: "outcome_unknown" },
      { kind: "unauthorized" },
      { crash: `connect ECONNRESET (key ${accepted["47"]})` },
    );
    for (let i = 0; i < 4; i++) {
      outputs.push(await h.call("create_replenishment_order", validOrder()));
    }
    await writeFile(keysFile, MALFORMED);
    await drive();
    await h.close();

    const text = JSON.stringify([outputs, h.recorder.traces, h.recorder.audits]);
    expect(h.recorder.traces.length).toBeGreaterThan(EVERY_PATH.length);
    expect(findLeaks("in-process", text, all)).toEqual([]);
  });

  it("spawned dist/stdio.js: nothing on stdout, stderr or in the log dir", async () => {
    const keysFile = join(dir, "stdio-keys.json");
    const logDir = join(dir, "stdio-log");
    await writeKeys(keysFile, "valid");
    const transport = stdioTransport({
      command: process.execPath,
      args: [`${DIST}stdio.js`],
      env: {
        ...(process.env as Record<string, string>),
        KORRAL_KEYS_FILE: keysFile,
        KORRAL_LOG_DIR: logDir,
        LOG_LEVEL: "trace",
      },
      stderr: "pipe",
    });
    let stderr = "";
    transport.stderr?.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    // Every frame the server sends on stdout, as the client received it.
    const frames: unknown[] = [];
    const client = new Client({ name: "canary", version: "1" });
    await client.connect(transport);
    const onmessage = transport.onmessage;
    transport.onmessage = (message) => {
      frames.push(message);
      onmessage?.(message);
    };
    for (const state of ["valid", "malformed", "valid"] as const) {
      await writeKeys(keysFile, state);
      for (const call of EVERY_PATH) {
        frames.push(await client.callTool(call).catch((e: unknown) => String(e)));
      }
    }
    await client.close();

    const found = [
      ...findLeaks("stdout", JSON.stringify(frames), CANARY_VALUES),
      ...findLeaks("stderr", stderr, CANARY_VALUES),
    ];
    const logFiles = await filesUnder(logDir);
    // The trace and audit logs were written, so the search below really covers them.
    expect(logFiles.map((f) => f.text).join("")).toContain("RPL-47-001");
    for (const file of logFiles) {
      found.push(...findLeaks(file.path, file.text, CANARY_VALUES));
    }
    expect(frames.length).toBeGreaterThan(EVERY_PATH.length * 3);
    // The successes really ran (so the canary check covers them too).
    expect(JSON.stringify(frames)).toContain("RPL-47-001");
    expect(found).toEqual([]);
  });

  it("spawned dist/http.js: nothing in responses, stdout, stderr or the log dir", async () => {
    const keysFile = join(dir, "http-keys.json");
    const logDir = join(dir, "http-log");
    await writeKeys(keysFile, "valid");
    const port = await freePort();
    const server = spawnDist("http.js", {
      PORT: String(port),
      HOST: "127.0.0.1",
      KORRAL_KEYS_FILE: keysFile,
      KORRAL_LOG_DIR: logDir,
      LOG_LEVEL: "trace",
    });
    const bodies: string[] = [];
    try {
      await waitForHealthy(server, `http://127.0.0.1:${port}/healthz`);
      let id = 0;
      for (const state of ["valid", "malformed", "valid"] as const) {
        await writeKeys(keysFile, state);
        for (const call of EVERY_PATH) {
          const res = await fetch(`http://127.0.0.1:${port}/mcp`, {
            method: "POST",
            headers: MCP_HEADERS,
            body: JSON.stringify(toolCall(++id, call.name, call.arguments)),
          });
          expect(res.status).toBeLessThan(500);
          bodies.push(`${JSON.stringify([...res.headers])} ${await res.text()}`);
        }
      }
    } finally {
      await server.stop();
    }
    const found = [
      ...findLeaks("responses", bodies.join("\n"), CANARY_VALUES),
      ...findLeaks("stdout", server.stdout(), CANARY_VALUES),
      ...findLeaks("stderr", server.stderr(), CANARY_VALUES),
    ];
    const logFiles = await filesUnder(logDir);
    // The trace and audit logs were written, so the search below really covers them.
    expect(logFiles.map((f) => f.text).join("")).toContain("RPL-47-001");
    for (const file of logFiles) {
      found.push(...findLeaks(file.path, file.text, CANARY_VALUES));
    }
    expect(bodies.join("\n")).toContain("RPL-47-001");
    expect(found).toEqual([]);
  });

  it("the scanner itself finds a planted canary, raw and base64-encoded inside a blob", () => {
    const canary = CANARY_VALUES[0] as string;
    const blob = Buffer.from(`Authorization: Basic user:${canary}`).toString("base64");
    expect(findLeaks("raw", `x${canary}y`, [canary])).not.toEqual([]);
    expect(findLeaks("b64", `{"h":"${blob}"}`, [canary])).not.toEqual([]);
    expect(findLeaks("clean", "nothing to see", [canary])).toEqual([]);
  });
});
