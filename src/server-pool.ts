import type { Server } from "@modelcontextprotocol/sdk/server/index.js";

/**
 * Prebuilt MCP servers for the stateless HTTP path. Each request borrows one server for itself
 * alone (a server shared by concurrent requests fails with "Already connected to a transport"
 * as soon as a tool awaits anything), connects its own transport, and gives the server back once
 * that transport is closed. The pool grows to the peak concurrency and keeps at most `maxIdle`.
 */
export class ServerPool {
  private readonly idle: Server[] = [];
  constructor(
    private readonly build: () => Server,
    private readonly maxIdle = 128,
  ) {}

  acquire(): Server {
    return this.idle.pop() ?? this.build();
  }

  /** Only for a server whose transport is closed: its protocol state has been reset. */
  release(server: Server): void {
    if (this.idle.length < this.maxIdle) this.idle.push(server);
  }

  get idleCount(): number {
    return this.idle.length;
  }
}
