import { pathToFileURL } from "node:url";
import { hostHeaderValidation } from "@modelcontextprotocol/sdk/server/middleware/hostHeaderValidation.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import express, { type Express, type NextFunction, type Request, type Response } from "express";
import { ConfigError, loadConfig } from "./config.js";
import { createKeyProvider } from "./keys/index.js";
import { requestLogging } from "./logging/http-middleware.js";
import { opsLog } from "./logging/ops.js";
import { setUpLogging } from "./logging/setup.js";
import { createServer, defaultDeps, SERVER_NAME, SERVER_VERSION } from "./server.js";
import { createStoreLink } from "./storelink/index.js";
import type { ServerDeps } from "./tools/define.js";

const JSON_BODY_LIMIT = "256kb";

const rpcError = (res: Response, status: number, code: number, message: string): void => {
  if (res.headersSent) return;
  res.status(status).json({ jsonrpc: "2.0", error: { code, message }, id: null });
};

const isClientError = (error: unknown): error is { status: number } => {
  const status = (error as { status?: unknown } | null)?.status;
  return typeof status === "number" && status >= 400 && status < 500;
};

export interface AppOptions {
  /**
   * Host names /mcp answers to (DNS-rebinding protection: a web page in the buyer's browser
   * must not reach a server on their loopback). Unset accepts any Host, for Cloud Run, where
   * Google's front end routes by host and IAM guards the service.
   */
  allowedHosts?: string[];
}

/** Loopback host names, enforced whenever the server itself listens on loopback. */
export const LOOPBACK_HOSTS = ["localhost", "127.0.0.1", "[::1]"];
const isLoopback = (host: string): boolean =>
  ["localhost", "127.0.0.1", "::1", "[::1]"].includes(host);

/**
 * The stateless streamable HTTP app. `deps` (one StoreLink, one key provider, one recorder) are
 * shared by every request of the process; each request gets its own MCP server and transport so
 * concurrent requests never share protocol state.
 */
export function createApp(deps: ServerDeps, options: AppOptions = {}): Express {
  const app = express();
  app.disable("x-powered-by");
  app.use(requestLogging);
  if (options.allowedHosts) app.use("/mcp", hostHeaderValidation(options.allowedHosts));

  app.get("/healthz", (_req, res) => {
    res.json({ status: "ok", name: SERVER_NAME, version: SERVER_VERSION });
  });

  app.post(
    "/mcp",
    express.json({ limit: JSON_BODY_LIMIT }),
    async (req: Request, res: Response) => {
      const server = createServer(deps);
      const transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: undefined,
        enableJsonResponse: true,
      });
      res.on("close", () => {
        void transport.close();
        void server.close();
      });
      try {
        await server.connect(transport);
        await transport.handleRequest(req, res, req.body);
      } catch (error) {
        opsLog.error({ err: error }, "MCP request failed");
        rpcError(res, 500, -32603, "Internal server error");
      }
    },
  );

  const methodNotAllowed = (_req: Request, res: Response): void => {
    res.setHeader("Allow", "POST");
    rpcError(res, 405, -32000, "Method not allowed: this server is stateless; use POST /mcp.");
  };
  app.get("/mcp", methodNotAllowed);
  app.delete("/mcp", methodNotAllowed);

  app.use((_req: Request, res: Response) => {
    rpcError(res, 404, -32601, "Not found: the MCP endpoint is POST /mcp.");
  });

  // Body-parser failures and anything unexpected: JSON-RPC bodies, never an HTML page or a stack.
  app.use((error: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const type = (error as { type?: string }).type;
    if (type === "entity.parse.failed") {
      rpcError(res, 400, -32700, "Parse error: the request body is not valid JSON.");
    } else if (type === "entity.too.large") {
      rpcError(res, 413, -32600, `Request body larger than ${JSON_BODY_LIMIT}.`);
    } else if (isClientError(error)) {
      // Other body-parser refusals (unsupported charset or content-encoding, a bad gzip stream):
      // the client's fault, so its 4xx, never a 500.
      rpcError(res, error.status, -32600, "Bad request: send a UTF-8 JSON-RPC body.");
    } else {
      opsLog.error({ err: error }, "HTTP request failed");
      rpcError(res, 500, -32603, "Internal server error");
    }
  });
  return app;
}

async function main(): Promise<void> {
  const config = loadConfig();
  const recorder = setUpLogging(config, "http");
  const app = createApp(
    defaultDeps({
      keys: await createKeyProvider(config),
      storelink: createStoreLink(config),
      recorder,
    }),
    isLoopback(config.host) ? { allowedHosts: LOOPBACK_HOSTS } : {},
  );
  const listener = app.listen(config.port, config.host, () => {
    const address = listener.address();
    opsLog.info(
      {
        host: config.host,
        port: typeof address === "object" && address ? address.port : config.port,
      },
      "korral-storelink MCP server listening on HTTP",
    );
  });
  const stop = (): void => {
    listener.close(() => void recorder.close().finally(() => process.exit(0)));
  };
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((error: unknown) => {
    console.error(
      error instanceof ConfigError ? error.message : "korral-storelink failed to start on HTTP",
    );
    process.exit(error instanceof ConfigError ? 2 : 1);
  });
}
