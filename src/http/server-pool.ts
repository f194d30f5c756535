import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { NodeJsonTransport } from "./json-transport.js";

/** A prebuilt MCP server and the transport it stays connected to. */
export interface PooledServer {
  server: Server;
  transport: NodeJsonTransport;
}

/**
 * Prebuilt, connected MCP servers for the stateless HTTP path. Each request borrows one for
 * itself alone (a server shared by concurrent requests fails with "Already connected to a
 * transport" as soon as a tool awaits anything, and mixes up request ids) and gives it back once
 * every handler the server ever started has sent its answer. The pool grows to the peak
 * concurrency and keeps at most `maxIdle`.
 */
export class ServerPool {
  private readonly idle: PooledServer[] = [];
  constructor(
    private readonly build: () => Server,
    private readonly maxIdle = 128,
  ) {}

  async acquire(): Promise<PooledServer> {
    const pooled = this.idle.pop();
    if (pooled) return pooled;
    const server = this.build();
    const transport = new NodeJsonTransport();
    await server.connect(transport);
    return { server, transport };
  }

  /**
   * Ends the borrower's POST. A server whose handlers have all settled (`transport.end()`) goes
   * back to the pool; any other (a client gone mid-call, a request cancelled in its batch, an
   * initialize) is closed, which aborts its handlers and drops their late
   * answers, and is never used again.
   */
  release(pooled: PooledServer): void {
    const settled = pooled.transport.end();
    if (settled && this.idle.length < this.maxIdle) {
      this.idle.push(pooled);
    } else {
      void pooled.server.close().catch(() => {});
    }
  }
}
