import type { IncomingMessage, ServerResponse } from "node:http";
import type { JSONRPCMessage as WireMessage } from "@modelcontextprotocol/sdk/types.js";
import { type AuthInfo, createMcpHandler } from "@modelcontextprotocol/server";
import type { TraceFields } from "../logging/trace-context.js";
import { createModernServer } from "../mcp/modern.js";
import { forTheWire } from "../mcp/protocol-error.js";
import type { ComposedDeps } from "../tools/define.js";
import { endWithJson } from "./json-answer.js";

/** The request headers the SDK's modern path reads; nothing else is copied per request. */
const FORWARDED_HEADERS = [
  "content-type",
  "accept",
  "mcp-protocol-version",
  "mcp-method",
  "mcp-name",
] as const;

/**
 * The SDK's stateless handler for 2026-07-28 requests (2025 ones never reach it), mounted on
 * Node's request and response. It hands the SDK the body Express already parsed (the SDK then
 * never reads the Request's body), copies only the headers it reads (and any `Mcp-Param-*`), and
 * rewrites error messages as every other answer of the server is (`forTheWire`).
 */
export function modernHttpHandler(deps: ComposedDeps) {
  const handler = createMcpHandler(
    ({ authInfo }) =>
      createModernServer(deps, {
        caller: authInfo?.clientId ?? "unknown",
        traceFields: (authInfo?.extra?.traceFields as TraceFields | undefined) ?? {},
      }),
    { legacy: "reject" },
  );
  return async (
    req: IncomingMessage,
    res: ServerResponse,
    body: unknown,
    authInfo: AuthInfo,
  ): Promise<void> => {
    const abort = new AbortController();
    res.once("close", () => abort.abort());
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
    const response = await handler.fetch(request, { authInfo, parsedBody: body });
    const type = response.headers.get("content-type") ?? "";
    if (!type.startsWith("application/json")) {
      // An event stream (or nothing): passed on as it comes.
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
        text = JSON.stringify(forTheWire(JSON.parse(text) as WireMessage));
      } catch {
        // Not one JSON-RPC message: as it is.
      }
    }
    endWithJson(res, response.status, text, type);
  };
}
