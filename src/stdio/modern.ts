import { randomUUID } from "node:crypto";
import type { JSONRPCMessage, RequestId, Transport } from "@modelcontextprotocol/server";
import { serveStdio } from "@modelcontextprotocol/server/stdio";
import { opsLog } from "../logging/ops.js";
import { createModernServer, isModern, type ModernCaller } from "../mcp/modern.js";
import { STDIO_CALLER } from "../server.js";
import type { ComposedDeps } from "../tools/define.js";

/**
 * Every 2026-07-28 request of a stdio connection comes from its one client, named for this
 * connection alone: confirmation state it was given is refused by any other stdio process or
 * connection, whatever key signs it.
 */
const connectionCaller = (): ModernCaller => ({
  caller: `${STDIO_CALLER}:${randomUUID()}`,
  traceFields: {},
});

/** Where the stdio leg writes its answers: the connection's own transport. */
interface Wire {
  send(message: JSONRPCMessage): Promise<void>;
}

/**
 * The transport `serveStdio` owns for the modern leg of a stdio connection: it receives only the
 * lines the router hands it and writes through the connection's transport (which keeps the line
 * limit, the answered-before-exit count and the broken-stdout handling for both eras).
 */
class ModernStdioChannel implements Transport {
  onmessage?: Transport["onmessage"];
  onclose?: () => void;
  onerror?: (error: Error) => void;
  constructor(
    private readonly wire: Wire,
    private readonly answered: (id: RequestId) => void,
  ) {}
  async start(): Promise<void> {}
  async send(message: JSONRPCMessage): Promise<void> {
    if (!("method" in message) && "id" in message && message.id !== undefined) {
      this.answered(message.id);
    }
    // The connection's transport: its sends already pass forTheWire (WireServer), as the 2025
    // server's do.
    await this.wire.send(message as never);
  }
  async close(): Promise<void> {
    this.onclose?.();
  }
  deliver(message: JSONRPCMessage): void {
    this.onmessage?.(message);
  }
}

/**
 * The modern leg of a stdio connection. The era is read from every line, never assumed from
 * earlier ones: `divert` takes a line that is a 2026-07-28 request (or the cancellation of one)
 * and serves it through the SDK v2's `serveStdio`; every other line stays with the 2025 server.
 */
export function modernStdio(deps: ComposedDeps, wire: Wire) {
  const open = new Set<RequestId>();
  const channel = new ModernStdioChannel(wire, (id) => open.delete(id));
  const caller = connectionCaller();
  const handle = serveStdio(() => createModernServer(deps, caller), {
    transport: channel,
    legacy: "reject",
    onerror: (error) => opsLog.warn({ err: error }, "MCP 2026-07-28 stdio request failed"),
  });
  return {
    divert(message: JSONRPCMessage): boolean {
      if (!("method" in message)) return false;
      if (!("id" in message)) {
        const cancelled = (message.params as { requestId?: RequestId } | undefined)?.requestId;
        if (message.method !== "notifications/cancelled" || cancelled === undefined) return false;
        if (!open.has(cancelled)) return false;
      } else if (isModern(message)) {
        open.add(message.id);
      } else {
        return false;
      }
      channel.deliver(message);
      return true;
    },
    close: () => handle.close(),
  };
}
