import { once } from "node:events";
import type { AddressInfo } from "node:net";
import type { McpApp } from "../../src/http/app.js";

/** An app listening on an ephemeral loopback port; `close` drops open connections first. */
export interface Listening {
  /** The app's MCP endpoint, http://127.0.0.1:<port>/mcp. */
  url: string;
  close(): Promise<void>;
}

export async function listen(app: McpApp): Promise<Listening> {
  const listener = app.listen(0, "127.0.0.1");
  await once(listener, "listening");
  return {
    url: `http://127.0.0.1:${(listener.address() as AddressInfo).port}/mcp`,
    close: () => {
      listener.closeAllConnections();
      return new Promise((resolve) => listener.close(() => resolve()));
    },
  };
}
