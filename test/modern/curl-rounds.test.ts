import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { undoAfterEach } from "../helpers/fixtures.js";
import { listening, runSyncOk, spawnDist } from "../helpers/spawn.js";

/** docs/protocol-eras.md's two 2026-07-28 rounds by curl, run as written against the built server. */

const ROOT = join(import.meta.dirname, "../..");
const { defer, workspace } = undoAfterEach();

function snippet(): string {
  const doc = readFileSync(join(ROOT, "docs/protocol-eras.md"), "utf8");
  const start = doc.indexOf("Both 2026-07-28 rounds by hand");
  const block = /```bash\n([\s\S]*?)```/.exec(doc.slice(start))?.[1];
  if (start < 0 || !block) throw new Error("docs/protocol-eras.md lost its curl rounds");
  return block;
}

describe("the curl rounds of docs/protocol-eras.md", () => {
  it("place one order the buyer confirmed", async () => {
    const ws = await workspace();
    const server = spawnDist("http.js", {
      HOST: "127.0.0.1",
      PORT: "0",
      KORRAL_KEYS_FILE: ws.keysFile,
      KORRAL_LOG_DIR: ws.logDir,
    });
    defer(() => server.stop());
    const { port } = await listening(server, 10_000);
    const out = runSyncOk("bash", ["-c", snippet()], {
      env: { ...process.env, PORT: String(port) },
    });
    const answer = JSON.parse(out) as { result: { structuredContent: { order_id: string } } };
    expect(answer.result.structuredContent.order_id).toBe("RPL-47-001");
    const audit = readFileSync(join(ws.logDir, "audit.log"), "utf8").trim().split("\n");
    expect(audit).toHaveLength(1);
    expect(audit[0]).toMatch(/ CREATED RPL-47-001 .* confirmed=buyer /);
  });
});
