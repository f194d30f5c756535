import type { IncomingMessage, ServerResponse } from "node:http";
import {
  type AuthInfo,
  createMcpHandler,
  type JSONRPCMessage,
  WebStandardStreamableHTTPServerTransport,
} from "@modelcontextprotocol/server";
import type { CallOrigin } from "../logging/call-record.js";
import { forTheWire } from "../mcp/protocol-error.js";
import { createServer, type Era } from "../mcp/server.js";
import type { TraceParent } from "../telemetry/api.js";
import type { Deps } from "../tools/define.js";
import { endWithJson } from "./json-answer.js";

/** The request headers the SDK reads; nothing else is copied per request. */
const FORWARDED_HEADERS = [
  "content-type",
  "accept",
  "mcp-protocol-version",
  "mcp-method",
  "mcp-name",
] as const;

/**
 * The SDK v2 serving POST /mcp in both eras from the one server factory (`mcp/server.ts`), one
 * server per request, mounted on Node's request and response:
 * - 2026-07-28: the SDK's `createMcpHandler`;
 * - 2025: the SDK's stateless streamable HTTP transport in JSON-response mode, which is what the
 *   handler's own 2025 fallback is, except that it answers with one JSON body rather than an
 *   event stream (the wire every 2025 client and curl user of this server has always read).
 * The SDK gets the body Express already parsed and only the headers it reads (and any
 * `Mcp-Param-*`); an answer the SDK wrote itself leaves through `forTheWire` too.
 */
export function mcpHttpHandler(deps: Deps) {
  // The request's origin, as the app established it (app.ts): never read from the client.
  const build = (era: Era, authInfo: AuthInfo | undefined) =>
    createServer(deps, {
      ...(authInfo?.extra?.origin as CallOrigin),
      era,
      asks2025: false,
      transport: "tcp",
      httpTrace: authInfo?.extra?.httpTrace as TraceParent | undefined,
    });
  const modern = createMcpHandler(({ era, authInfo }) => build(era, authInfo), {
    legacy: "reject",
  });

  /** One 2025 POST: its own server and transport, closed once answered or abandoned. */
  const legacy = async (request: Request, body: unknown, authInfo: AuthInfo) => {
    const server = build("legacy", authInfo);
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
    });
    const close = () => void server.close().catch(() => {});
    await server.connect(transport);
    request.signal.addEventListener("abort", close, { once: true });
    try {
      return await transport.handleRequest(request, { authInfo, parsedBody: body });
    } finally {
      close();
    }
  };

  return async (
    req: IncomingMessage,
    res: ServerResponse,
    { body, era, authInfo }: { body: unknown; era: Era; authInfo: AuthInfo },
  ): Promise<void> => {
    const abort = new AbortController();
    // Only a client gone before its answer aborts: an abort builds a DOMException, too dear for
    // every request.
    res.once("close", () => {
      if (!res.writableFinished) abort.abort();
    });
    const headers = new Headers();
    for (const name of FORWARDED_HEADERS) {
      const value = req.headers[name];
      if (typeof value === "string") headers.set(name, value);
    }
    for (const name in req.headers) {
      const value = req.headers[name];
      if (name.startsWith("mcp-param-") && typeof value === "string") headers.set(name, value);
    }
    const request = new Request(`http://localhost${req.url ?? "/mcp"}`, {
      method: "POST",
      headers,
      signal: abort.signal,
    });
    const response =
      era === "modern"
        ? await modern.fetch(request, { authInfo, parsedBody: body })
        : await legacy(request, body, authInfo);
    const type = response.headers.get("content-type") ?? "";
    if (!type.startsWith("application/json")) {
      // An event stream (or nothing, as for a 202): passed on as it comes.
      res.writeHead(response.status, Object.fromEntries(response.headers));
      if (response.body) {
        for await (const chunk of response.body) {
          if (abort.signal.aborted) break;
          res.write(chunk);
        }
      }
      res.end();
      return;
    }
    let text = await response.text();
    if (text.includes(": [")) {
      try {
        text = JSON.stringify(forTheWire(JSON.parse(text) as JSONRPCMessage));
      } catch {
        // Not one JSON-RPC message: as it is.
      }
    }
    endWithJson(res, response.status, text, type);
  };
}
