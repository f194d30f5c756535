import { CallToolResultSchema, McpError } from "@modelcontextprotocol/sdk/types.js";
import request from "supertest";
import { afterEach, describe, expect, it } from "vitest";
import { composeDeps } from "../../src/deps.js";
import { createApp } from "../../src/http/app.js";
import { TOOL_NAMES } from "../../src/tools/names.js";
import { connect, type Harness, MapKeyProvider, MemoryRecorder } from "../helpers/harness.js";
import { MCP_HEADERS } from "../helpers/rpc.js";

/**
 * JSON-RPC error messages leave the server without the "MCP error
 * <code>: " prefix (clients add it, so it used to read twice), whoever threw them: our handlers
 * or the SDK. resources/templates/list answers an empty list rather than -32601.
 */

const app = () =>
  createApp(composeDeps({ keys: new MapKeyProvider(), recorder: new MemoryRecorder() }));

const rpc = async (method: string, params: Record<string, unknown>) => {
  const res = await request(app())
    .post("/mcp")
    .set(MCP_HEADERS)
    .send({ jsonrpc: "2.0", id: 1, method, params });
  expect(res.status).toBe(200);
  return res.body as {
    result?: Record<string, unknown>;
    error?: { code: number; message: string };
  };
};

/** Requests that fail at the protocol level, with the code and the start of the message. */
const FAILING: { what: string; method: string; params: Record<string, unknown>; code: number }[] = [
  {
    what: "an unknown tool (server.ts)",
    method: "tools/call",
    params: { name: "delete_order", arguments: {} },
    code: -32602,
  },
  {
    what: "an unknown resource (resources.ts)",
    method: "resources/read",
    params: { uri: "korral://orders" },
    code: -32602,
  },
  {
    what: "an unknown prompt (prompts.ts)",
    method: "prompts/get",
    params: { name: "delete-everything" },
    code: -32602,
  },
  {
    what: "a prompt without its required argument (prompts.ts)",
    method: "prompts/get",
    params: { name: "replenishment-check", arguments: {} },
    code: -32602,
  },
  {
    what: "tools/call params the SDK itself refuses (an McpError thrown inside the SDK)",
    method: "tools/call",
    params: { arguments: {} },
    code: -32602,
  },
];

describe("JSON-RPC error messages on the wire carry no MCP error prefix", () => {
  for (const { what, method, params, code } of FAILING) {
    it(`${what}: the raw message has no prefix`, async () => {
      const body = await rpc(method, params);
      expect(body.error?.code).toBe(code);
      expect(body.error?.message).toBeTruthy();
      expect(body.error?.message).not.toMatch(/MCP error/);
    });
  }

  it("keeps what the message says: the unknown tool is named with the available ones", async () => {
    const body = await rpc("tools/call", { name: "delete_order", arguments: {} });
    expect(body.error?.message).toBe(
      `Unknown tool: delete_order. Available: ${TOOL_NAMES.join(", ")}`,
    );
  });
});

describe("through the SDK client, the prefix appears exactly once", () => {
  let h: Harness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  const rejection = async (promise: Promise<unknown>): Promise<McpError> => {
    const error = await promise.then(
      () => undefined,
      (e: unknown) => e,
    );
    if (!(error instanceof McpError)) throw new Error(`expected an McpError, got ${error}`);
    return error;
  };
  const prefixes = (message: string) => message.match(/MCP error/g)?.length ?? 0;

  it("unknown tool, unknown resource, unknown prompt, malformed tools/call", async () => {
    h = await connect();
    const errors = [
      await rejection(h.call("delete_order", {})),
      await rejection(h.client.readResource({ uri: "korral://orders" })),
      await rejection(h.client.getPrompt({ name: "delete-everything" })),
      await rejection(
        h.client.request(
          { method: "tools/call", params: { arguments: {} } as never },
          CallToolResultSchema,
        ),
      ),
    ];
    expect(errors.map((e) => e.message.split(":").slice(0, 2).join(":"))).toEqual([
      "MCP error -32602: Unknown tool",
      "MCP error -32602: Unknown resource korral",
      "MCP error -32602: Unknown prompt delete-everything. Available",
      "MCP error -32602: Invalid tools/call request",
    ]);
    for (const error of errors) expect(prefixes(error.message), error.message).toBe(1);
  });
});

describe("resources/templates/list", () => {
  it("answers an empty list through the SDK client", async () => {
    const h = await connect();
    try {
      expect(await h.client.listResourceTemplates()).toEqual({ resourceTemplates: [] });
    } finally {
      await h.close();
    }
  });

  it("answers an empty list on the wire, not -32601", async () => {
    const body = await rpc("resources/templates/list", {});
    expect(body.error).toBeUndefined();
    expect(body.result).toEqual({ resourceTemplates: [] });
  });
});
