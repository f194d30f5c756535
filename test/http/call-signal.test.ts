import { createServer, request, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { signalOf } from "../../src/http/call-signal.js";

/**
 * A call's abort signal on a real server and client: aborted once the client is gone before its
 * answer, whether the call asked for the signal before or after; never once the answer was sent.
 */
describe("signalOf: a call's abort signal, made when asked for", () => {
  const servers: ReturnType<typeof createServer>[] = [];
  afterEach(() => {
    for (const server of servers) server.close();
  });

  /** A server handing each response to `onRequest`; one request to it, cut or answered. */
  async function exchange(onRequest: (res: ServerResponse) => void, cut: boolean): Promise<void> {
    const closed = new Promise<void>((resolve) => {
      const server = createServer((_req, res) => {
        res.once("close", () => setImmediate(resolve));
        onRequest(res);
        if (!cut) res.end("ok");
      });
      servers.push(server);
      server.listen(0, "127.0.0.1", () => {
        const { port } = server.address() as AddressInfo;
        const req = request({ port, host: "127.0.0.1", path: "/", method: "POST" }, (res) =>
          res.resume(),
        );
        req.on("error", () => {});
        req.write("x");
        if (cut) setTimeout(() => req.destroy(), 20);
        else req.end();
      });
    });
    await closed;
  }

  it("asked for before the client leaves: aborted when it does", async () => {
    let signal: AbortSignal | undefined;
    await exchange((res) => {
      signal = signalOf(res)();
    }, true);
    expect(signal?.aborted).toBe(true);
  });

  it("asked for only after the client left: already aborted", async () => {
    let ask: (() => AbortSignal) | undefined;
    await exchange((res) => {
      ask = signalOf(res);
    }, true);
    expect(ask?.().aborted).toBe(true);
  });

  it("the answer sent: never aborted, and the same signal each time it is asked for", async () => {
    let ask: (() => AbortSignal) | undefined;
    let first: AbortSignal | undefined;
    await exchange((res) => {
      ask = signalOf(res);
      first = ask();
    }, false);
    expect(first?.aborted).toBe(false);
    expect(ask?.()).toBe(first);
  });
});
