import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { describe, expect, it } from "vitest";
import { TOOL_NAMES } from "../../src/tools/names.js";
import { undoAfterEach } from "../helpers/fixtures.js";
import { HERO_REASON } from "../helpers/harness.js";
import { initialize, modernMeta, toolCall } from "../helpers/rpc.js";
import { DIST, spawnDist, stdioTransport, stdoutMessages } from "../helpers/spawn.js";

const { defer, stdio, workspace } = undoAfterEach();

const auditLines = async (logDir: string): Promise<string[]> => {
  try {
    return (await readFile(join(logDir, "audit.log"), "utf8")).split("\n").filter(Boolean);
  } catch {
    return [];
  }
};

const ORDER = { store_id: "47", sku: "8847291", quantity: 24, reason: HERO_REASON };

/** The 2026-07-28 envelope a modern client puts on every request. */
const envelope = (capabilities: Record<string, unknown>) => modernMeta(capabilities, "raw");

describe("MCP 2026-07-28 over stdio (built dist/stdio.js)", () => {
  it.each([
    ["pinned to 2026-07-28", { pin: "2026-07-28" } as const],
    ["in auto mode", "auto" as const],
  ])(
    "the SDK v2 client %s: the buyer is asked, one CREATED confirmed=buyer",
    async (_name, mode) => {
      const ws = await workspace();
      const client = new Client(
        { name: "t", version: "1" },
        {
          versionNegotiation: { mode },
          capabilities: { elicitation: { form: {} } },
        },
      );
      const asked: string[] = [];
      client.setRequestHandler("elicitation/create", async (request) => {
        asked.push(request.params.message);
        return { action: "accept", content: { confirm: true } };
      });
      await client.connect(
        stdioTransport(
          {
            command: process.execPath,
            args: [join(DIST, "stdio.js")],
            env: { KORRAL_KEYS_FILE: ws.keysFile, KORRAL_LOG_DIR: ws.logDir },
            stderr: "pipe",
          },
          StdioClientTransport,
        ),
      );
      defer(() => client.close());
      expect(client.getProtocolEra()).toBe("modern");
      expect((await client.listTools()).tools).toHaveLength(TOOL_NAMES.length);
      const result = await client.callTool({
        name: "create_replenishment_order",
        arguments: ORDER,
      });
      expect(result.isError).toBeFalsy();
      expect((result.structuredContent as { order_id: string }).order_id).toBe("RPL-47-001");
      expect(asked).toHaveLength(1);
      expect(asked[0]).toMatch(/^Confirm this replenishment order/);
      const lines = await auditLines(ws.logDir);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/ CREATED RPL-47-001 .* confirmed=buyer /);
    },
  );

  it("a 2026-shaped call with no initialize is answered input_required, never written", async () => {
    const { ws, server } = await stdio();
    const call = toolCall(7, "create_replenishment_order", ORDER);
    const line = {
      ...call,
      params: { ...call.params, _meta: envelope({ elicitation: { form: {} } }) },
    };
    server.child.stdin?.write(`${JSON.stringify(line)}\n`);
    server.child.stdin?.end();
    expect(await server.exit).toBe(0);
    const answer = JSON.parse(server.stdout().trim());
    expect(answer.id).toBe(7);
    expect(answer.result.resultType).toBe("input_required");
    expect(answer.result.inputRequests.confirm.params.message).toContain("Quantity: 24");
    expect(typeof answer.result.requestState).toBe("string");
    // Round 1 is traced, not audited: nothing was written and no outcome exists yet.
    expect(await auditLines(ws.logDir)).toEqual([]);
    const trace = (await readFile(join(ws.logDir, "trace.jsonl"), "utf8")).trim().split("\n");
    expect(trace.map((l) => JSON.parse(l).status)).toEqual(["input_required"]);
  });

  it("a request with a malformed _meta or params is answered under its own id", async () => {
    const { server } = await stdio();
    const lines = [
      { jsonrpc: "2.0", id: 21, method: "tools/list", params: { _meta: 5 } },
      { jsonrpc: "2.0", id: "b", method: "tools/list", params: 7 },
      {
        jsonrpc: "2.0",
        id: 23,
        method: "tools/list",
        params: { _meta: { "io.modelcontextprotocol/protocolVersion": 5 } },
      },
      { jsonrpc: "2.0", id: 24, method: "tools/list", params: { _meta: envelope({}), cursor: 5 } },
    ];
    server.child.stdin?.write(`${lines.map((l) => JSON.stringify(l)).join("\n")}\n`);
    server.child.stdin?.end();
    expect(await server.exit).toBe(0);
    const answers = stdoutMessages(server);
    expect(answers.map((a) => a.id).sort()).toEqual([21, 23, 24, "b"]);
    for (const answer of answers) {
      expect(answer.error.code).toBe(-32602);
      expect(answer.error.message).not.toContain("\n");
    }
  });

  it("the opening exchange pins the era: after a 2025 initialize every line is served as 2025", async () => {
    const { ws, server } = await stdio();
    const call = toolCall(2, "create_replenishment_order", ORDER);
    const frames = [
      initialize(1),
      { jsonrpc: "2.0", method: "notifications/initialized" },
      // A 2026-07-28 envelope on a 2025 connection: the connection's client declared no
      // elicitation in its initialize, so it is not asked, and the audit says so.
      { ...call, params: { ...call.params, _meta: envelope({ elicitation: {} }) } },
      { jsonrpc: "2.0", id: 3, method: "tools/list" },
    ];
    server.child.stdin?.write(`${frames.map((f) => JSON.stringify(f)).join("\n")}\n`);
    server.child.stdin?.end();
    expect(await server.exit).toBe(0);
    const byId = new Map(stdoutMessages(server).map((m) => [m.id, m]));
    expect(byId.get(1).result.protocolVersion).toBe("2025-06-18");
    expect(byId.get(2).result.resultType).toBeUndefined();
    expect(byId.get(2).result.structuredContent.order_id).toBe("RPL-47-001");
    expect(byId.get(3).result.tools).toHaveLength(TOOL_NAMES.length);
    expect(byId.get(3).result.resultType).toBeUndefined();
    expect(await auditLines(ws.logDir)).toEqual([expect.stringContaining("confirmed=agent")]);
  });

  it("the opening exchange pins the era: after a 2026-07-28 request a 2025 initialize is refused", async () => {
    const { ws, server } = await stdio();
    const frames = [
      { jsonrpc: "2.0", id: 1, method: "tools/list", params: { _meta: envelope({}) } },
      initialize(2),
    ];
    server.child.stdin?.write(`${frames.map((f) => JSON.stringify(f)).join("\n")}\n`);
    server.child.stdin?.end();
    expect(await server.exit).toBe(0);
    const byId = new Map(stdoutMessages(server).map((m) => [m.id, m]));
    expect(byId.get(1).result.resultType).toBe("complete");
    expect(byId.get(2).error.message).toMatch(/protocol version/i);
    expect(await auditLines(ws.logDir)).toEqual([]);
  });

  it("request state is bound to the connection: another stdio process with the same key refuses it", async () => {
    const ws = await workspace();
    const env = {
      KORRAL_KEYS_FILE: ws.keysFile,
      KORRAL_LOG_DIR: ws.logDir,
      KORRAL_REQUEST_STATE_KEY: "one-state-key-shared-by-both-processes!",
    };
    const call = toolCall(1, "create_replenishment_order", ORDER);
    const roundOne = {
      ...call,
      params: { ...call.params, _meta: envelope({ elicitation: { form: {} } }) },
    };
    const roundTwo = (id: number, requestState: string) => ({
      ...roundOne,
      id,
      params: {
        ...roundOne.params,
        requestState,
        inputResponses: { confirm: { action: "accept", content: { confirm: true } } },
      },
    });
    const answerOf = async (server: ReturnType<typeof spawnDist>, id: number) => {
      for (let i = 0; i < 400; i++) {
        const answer = stdoutMessages(server).find((m) => m.id === id);
        if (answer) return answer;
        await new Promise((r) => setTimeout(r, 25));
      }
      throw new Error(`no answer ${id}: ${server.stderr()}`);
    };
    const first = spawnDist("stdio.js", env);
    const other = spawnDist("stdio.js", env);
    try {
      first.child.stdin?.write(`${JSON.stringify(roundOne)}\n`);
      const state = (await answerOf(first, 1)).result.requestState as string;
      expect(typeof state).toBe("string");
      // The other process (the same key, another connection) refuses the answer: nothing sent.
      other.child.stdin?.write(`${JSON.stringify(roundTwo(2, state))}\n`);
      const refused = await answerOf(other, 2);
      expect(refused.result.isError).toBe(true);
      expect(refused.result.structuredContent.error.type).toBe("not_confirmed");
      expect(refused.result.structuredContent.error.message).toContain("issued to another caller");
      // The connection that asked accepts it.
      first.child.stdin?.write(`${JSON.stringify(roundTwo(3, state))}\n`);
      const placed = await answerOf(first, 3);
      expect(placed.result.structuredContent.order_id).toBe("RPL-47-001");
    } finally {
      await Promise.all([first.stop(), other.stop()]);
    }
    const lines = await auditLines(ws.logDir);
    expect(lines.filter((l) => / CREATED /.test(l))).toHaveLength(1);
    expect(lines.filter((l) => / REJECTED /.test(l))).toHaveLength(1);
  });
});
