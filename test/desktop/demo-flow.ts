import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { type CallToolResult, ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { HERO_REASON } from "../helpers/harness.js";
import { stdioTransport } from "../helpers/spawn.js";

/** How a desktop client starts the server: what a config snippet or a bundle manifest says. */
export interface Launch {
  command: string;
  args: string[];
  env: Record<string, string>;
  /** The client's working directory: never the repository. */
  cwd: string;
}

export interface DemoRun {
  toolNames: string[];
  lookup: CallToolResult;
  stock: CallToolResult;
  /** The approved order (with `order: true`): the buyer confirms the elicitation form. */
  order?: CallToolResult;
  /** Errors the client's transport raised, e.g. a stdout line that is not a JSON-RPC message. */
  protocolErrors: Error[];
  stderr: string;
}

/**
 * Starts the server as a desktop client does (SDK Client over stdio, the client's default
 * environment plus the configured env) and runs the README's demo flow up to the stock read:
 * "butter" -> lookup_sku -> get_stock_position for 8847291 at store 47, and with `order` the
 * approved order of 24 (the confirmation form answered "confirm"), which validates the answer
 * with the SDK's Ajv loaded from node_modules.
 */
export async function runDemoFlow(
  launch: Launch,
  options: { order?: boolean } = {},
): Promise<DemoRun> {
  const transport = stdioTransport({ ...launch, stderr: "pipe" });
  let stderr = "";
  transport.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  // Declares form elicitation, as desktop clients that can ask the buyer do, and confirms.
  const client = new Client(
    { name: "korral-desktop-test", version: "1.0.0" },
    { capabilities: { elicitation: { form: {} } } },
  );
  client.setRequestHandler(ElicitRequestSchema, () => ({
    action: "accept",
    content: { confirm: true },
  }));
  const protocolErrors: Error[] = [];
  client.onerror = (error) => protocolErrors.push(error);
  try {
    await client.connect(transport);
    const { tools } = await client.listTools();
    const lookup = (await client.callTool({
      name: "lookup_sku",
      arguments: { query: "butter" },
    })) as CallToolResult;
    const stock = (await client.callTool({
      name: "get_stock_position",
      arguments: { sku: "8847291", store_ids: ["47"] },
    })) as CallToolResult;
    const order = options.order
      ? ((await client.callTool({
          name: "create_replenishment_order",
          arguments: { store_id: "47", sku: "8847291", quantity: 24, reason: HERO_REASON },
        })) as CallToolResult)
      : undefined;
    const toolNames = tools.map((t) => t.name);
    return { toolNames, lookup, stock, ...(order && { order }), protocolErrors, stderr };
  } catch (error) {
    throw new Error(`${launch.command} ${launch.args.join(" ")} failed: ${error}\n${stderr}`);
  } finally {
    await client.close();
  }
}

/** The hero case's live numbers at store 47 (README: 3 on hand, 11 sold, gap +8). */
export const HERO_STORE_47 = {
  status: "ok",
  store_id: "47",
  on_hand: 3,
  units_sold_last_24h: 11,
  gap: 8,
} as const;
