import {
  createServer as createHttpServer,
  type IncomingMessage,
  type RequestListener,
  type Server,
  type ServerResponse,
} from "node:http";
import type { AuthInfo } from "@modelcontextprotocol/server";
import express, { type Request, type Response } from "express";
import type { Config } from "../config.js";
import type { ReconcileReport } from "../lifecycle/reconcile.js";
import { type CallOrigin, unverifiedOrigin, verifiedOrigin } from "../logging/call-record.js";
import { requestLogging } from "../logging/http-middleware.js";
import { opsLog } from "../logging/ops.js";
import { traceFieldsOf } from "../logging/trace-context.js";
import { markNonDataNames } from "../mcp/argument-names.js";
import { type CallTrace, callTool } from "../mcp/call-tool.js";
import { type Era, MODERN_REVISION, SERVER_NAME, SERVER_VERSION } from "../mcp/server.js";
import { unverifiedPrincipal } from "../policy/principal.js";
import { traceParentOf, traceParentOfHeaders } from "../telemetry/api.js";
import { ATTR } from "../telemetry/conventions.js";
import type { Deps } from "../tools/define.js";
import type { AuthGate } from "./auth/gate.js";
import {
  bodyRefusals,
  JSON_BODY_LIMIT_BYTES,
  MAX_BODY_DEPTH,
  REPEATED_ID,
  repeatsId,
  TOO_DEEP,
  tooDeep,
  withoutCancelled,
} from "./body-refusals.js";
import { signalOf } from "./call-signal.js";
import { callerOf } from "./caller.js";
import { directPost } from "./direct-post.js";
import { eraOf } from "./era.js";
import { type FastRead, fastReadAnswer, fastReadOf } from "./fast-reads.js";
import { hostCheck, hostGuard, originCheck, originGuard, rpcError } from "./guards.js";
import { isLoopbackHost, LOOPBACK_HOSTS } from "./host-patterns.js";
import { endWithJson } from "./json-answer.js";
import { mcpHttpHandler } from "./mcp-handler.js";

/** The 2025 revision a request names in its header, for its span (none: the latest 2025 one). */
const legacyRevisionOf = (req: IncomingMessage): string => {
  const named = req.headers["mcp-protocol-version"];
  return typeof named === "string" ? named : "2025-06-18";
};

/**
 * The SERVER span of an MCP request other than tools/call (initialize, tools/list, ...), which
 * ends with its answer; a tools/call's span is the call's own (mcp/call-tool.ts). A batch or a
 * notification has no span of its own.
 */
function spanOtherRequest(
  deps: Deps,
  body: unknown,
  era: Era,
  req: IncomingMessage,
  res: ServerResponse,
): void {
  if (body === null || typeof body !== "object" || Array.isArray(body)) return;
  const { method, id, params } = body as { method?: unknown; id?: unknown; params?: unknown };
  if (typeof method !== "string" || method === "tools/call" || id === undefined) return;
  const meta =
    params !== null && typeof params === "object"
      ? (params as { _meta?: unknown })._meta
      : undefined;
  const span = deps.telemetry.request({
    method,
    parent: traceParentOf(meta) ?? traceParentOfHeaders(req.headers),
    attributes: {
      [ATTR.jsonrpcId]: typeof id === "string" || typeof id === "number" ? String(id) : undefined,
      [ATTR.protocolVersion]: era === "modern" ? MODERN_REVISION : legacyRevisionOf(req),
      [ATTR.transport]: "tcp",
    },
  });
  res.once("close", () => {
    if (res.statusCode >= 400) span.fail(String(res.statusCode));
    span.end();
  });
}

/** The health answer's paths: the probes' and one Cloud Run's front end never reserves. */
export const HEALTH_PATHS = ["/healthz", "/health"];

export interface AppOptions {
  /**
   * Host names /mcp answers to (DNS-rebinding protection: a web page in the buyer's browser
   * must not reach a server on their loopback). Unset accepts any Host; see `allowedHostsFor`.
   */
  allowedHosts?: readonly string[];
  /** Browser origins accepted besides localhost pages; no Origin header is always accepted. */
  allowedOrigins?: readonly string[];
  /** The StoreLink in use as /healthz names it: "embedded demo" or the URL's host only. */
  storelink?: string;
  /**
   * Who an unauthenticated request acts for (`by=`): `local:<KORRAL_PRINCIPAL>` or the account
   * the server runs as (policy/principal.ts). Default: the account.
   */
  unverifiedPrincipal?: string;
  /** The shared limits store's health, as /healthz says it; unset: the limits are per instance. */
  limits?: { readonly state: "ok" | "unavailable" };
  /**
   * Answer plain read calls of both eras without the SDK (fast-reads.ts; default true). Off,
   * every request takes the SDK's path: the fast path's reference in tests.
   */
  fastReads?: boolean;
  /**
   * Take a plain POST /mcp at the node:http level, before Express (direct-post.ts; default
   * true). Off, every request goes through Express: the direct way's reference in tests. Off
   * too while debug logging is on, so its access line sees every request.
   */
  directPost?: boolean;
  /** The resource server in front of POST /mcp (KORRAL_AUTH); unset: today's unverified caller. */
  auth?: AuthGate;
  /**
   * Runs a reconciler pass (`POST /internal/reconcile`, for a scheduler); unset: no such route.
   * The caller is authenticated as /mcp's are, and the store policy says who may.
   */
  reconcile?: () => Promise<ReconcileReport>;
}

/**
 * The Host names to enforce: the loopback names plus `KORRAL_ALLOWED_HOSTS` when that is set (on
 * Cloud Run: the service's own host); the loopback names alone when listening on loopback; else
 * none (any Host), as before that variable existed: Google's front end routes by host and IAM
 * guards the service.
 */
export function allowedHostsFor(config: Pick<Config, "host" | "allowedHosts">) {
  if (config.allowedHosts.length > 0) return [...LOOPBACK_HOSTS, ...config.allowedHosts];
  return isLoopbackHost(config.host) ? LOOPBACK_HOSTS : undefined;
}

/**
 * The service as a node:http request listener (supertest and embedders take it as it is), with
 * Express's `listen`: a listen error goes to the callback, as Express 5 does it.
 */
export type McpApp = RequestListener & {
  listen(port: number, host: string, callback?: (error?: Error) => void): Server;
};

/**
 * The stateless streamable HTTP app. `deps` (one StoreLink, one key provider, one recorder, one
 * limiter) are shared by every request of the process; each request gets its own MCP server and
 * transport from the SDK (mcp-handler.ts), or the fast path for a plain read, so concurrent
 * requests never share protocol state. A plain POST /mcp comes in the direct way
 * (direct-post.ts); everything else through Express.
 */
export function createApp(deps: Deps, options: AppOptions = {}): McpApp {
  const app = express();
  const unverified = options.unverifiedPrincipal ?? unverifiedPrincipal(undefined).id;
  app.disable("x-powered-by");
  app.disable("etag");
  // Mounted only when its lines are wanted: its listener is per-request work otherwise.
  if (opsLog.isLevelEnabled("debug")) app.use(requestLogging);
  const guards = [originGuard(options.allowedOrigins ?? [])];
  if (options.allowedHosts) guards.unshift(hostGuard(options.allowedHosts));
  const direct = options.directPost !== false && !opsLog.isLevelEnabled("debug");
  const handle = mcpHttpHandler(deps);
  /** A request that failed unexpectedly: a JSON-RPC 500, or a cut answer. */
  const failed = (res: ServerResponse, error: unknown): void => {
    opsLog.error({ err: error }, "MCP request failed");
    if (!res.headersSent) rpcError(res, 500, -32603, "Internal server error");
    else res.destroy();
  };
  const fastReads = options.fastReads !== false;
  /** A plain read (fast-reads.ts): the tool's answer in the SDK's shape for its era. */
  const traced = deps.telemetry.enabled;
  const serveFastRead = (
    res: ServerResponse,
    read: FastRead,
    origin: CallOrigin,
    req: IncomingMessage,
  ) => {
    const trace: CallTrace | undefined = traced
      ? {
          parent: traceParentOf(read.meta) ?? traceParentOfHeaders(req.headers),
          transport: "tcp",
          protocolVersion: read.era === "modern" ? MODERN_REVISION : legacyRevisionOf(req),
          jsonrpcId: read.id,
        }
      : undefined;
    callTool(deps, read.name, read.args, origin, { signal: signalOf(res), trace }).then(
      (result) => {
        if (res.destroyed) return;
        endWithJson(res, 200, fastReadAnswer(read.id, result, read.era));
      },
      (error: unknown) => failed(res, error),
    );
  };

  const auth = options.auth;
  // Routes, not app-wide middleware, and POST /mcp first: every router layer a request passes
  // costs it a path match. The token is checked before the body is read, the write's scope after.
  const authenticate = auth ? [auth.authenticate] : [];
  const writeScope = auth ? [auth.requireWriteScope] : [];
  const json = express.json({ limit: JSON_BODY_LIMIT_BYTES });
  /** POST /mcp with its body parsed: the one handler of both ways in. */
  const answerPost = (req: IncomingMessage, res: ServerResponse, parsed: unknown): void => {
    // Before anything else walks the body: every later walk is then bounded too.
    if (tooDeep(parsed, MAX_BODY_DEPTH)) {
      rpcError(res, 400, -32600, TOO_DEEP);
      return;
    }
    if (repeatsId(parsed)) {
      rpcError(res, 400, -32600, REPEATED_ID);
      return;
    }
    const body = withoutCancelled(parsed);
    markNonDataNames(body);
    // Who the call acts for: the verified principal when KORRAL_AUTH is on (it then also keys
    // the rate limit and binds confirmation state), else the unverified local one and the
    // caller. The raw token is deliberately not carried along.
    const verified = auth?.verifiedOf(req);
    const traceFields = traceFieldsOf(req.headers);
    const origin = verified
      ? verifiedOrigin(verified, traceFields)
      : unverifiedOrigin(unverified, callerOf(req), traceFields);
    const read = fastReads ? fastReadOf(body, req.headers) : undefined;
    if (read) {
      serveFastRead(res, read, origin, req);
      return;
    }
    const authInfo: AuthInfo = {
      token: "",
      clientId: origin.caller,
      scopes: verified ? [...verified.scopes] : [],
      extra: traced ? { origin, httpTrace: traceParentOfHeaders(req.headers) } : { origin },
    };
    const era = eraOf(body, req.headers);
    if (traced) spanOtherRequest(deps, body, era, req, res);
    handle(req, res, { body, era, authInfo }).catch((error: unknown) => failed(res, error));
  };
  app.post("/mcp", ...guards, ...authenticate, json, ...writeScope, (req, res) =>
    answerPost(req, res, req.body),
  );

  // Says which StoreLink is in use (never a key or a path), so an operator sees a demo
  // deployment at a glance, and whether writes can be checked now: `limits` is "unavailable"
  // while the shared limits store cannot be used (every write is then refused). Still 200 then,
  // so Cloud Run keeps the instance: reads go on.
  const reconcile = options.reconcile;
  if (reconcile) {
    app.post("/internal/reconcile", ...guards, ...authenticate, async (req, res) => {
      const verified = auth?.verifiedOf(req);
      const who = verified
        ? { id: verified.principal, idpGroups: verified.groups }
        : { id: unverified };
      const decision = (await deps.policy.current()).mayReconcile(who);
      if (decision.verdict === "shadow") opsLog.warn({ by: who.id }, decision.reason);
      if (!decision.allowed) {
        const status = decision.verdict === "unavailable" ? 503 : 403;
        opsLog.warn({ by: who.id }, decision.reason);
        const error = decision.verdict === "unavailable" ? "policy_unavailable" : "not_permitted";
        endWithJson(res, status, JSON.stringify({ error }));
        return;
      }
      endWithJson(res, 200, JSON.stringify(await reconcile()));
    });
  }

  const health = {
    status: "ok",
    name: SERVER_NAME,
    version: SERVER_VERSION,
    ...(options.storelink === undefined ? {} : { storelink: options.storelink }),
  };
  const limitsStore = options.limits === undefined ? "per-instance" : "shared";
  // /healthz for the container's probes; /health for checks through the service URL, since
  // Cloud Run's front end reserves some paths ending in "z" and may never pass /healthz on.
  // RFC 9728: where a client that got the 401 finds the authorization server.
  if (auth && auth.metadataPaths.length > 0) app.get([...auth.metadataPaths], auth.metadata);
  app.get(HEALTH_PATHS, (_req, res) => {
    res.json({ ...health, limits: options.limits?.state ?? "ok", limits_store: limitsStore });
  });

  const methodNotAllowed = (_req: Request, res: Response): void => {
    res.setHeader("Allow", "POST");
    rpcError(res, 405, -32000, "Method not allowed: this server is stateless; use POST /mcp.");
  };
  app.all("/mcp", ...guards, methodNotAllowed);

  app.use((_req: Request, res: Response) => {
    rpcError(res, 404, -32601, "Not found: the MCP endpoint is POST /mcp.");
  });

  app.use(bodyRefusals);

  const listener: RequestListener = direct
    ? directPost({
        app,
        hostAllowed: options.allowedHosts ? hostCheck(options.allowedHosts) : undefined,
        originAllowed: originCheck(options.allowedOrigins ?? []),
        ...(auth ? { auth } : {}),
        answer: answerPost,
        failed,
      })
    : app;
  return Object.assign(listener, {
    listen(port: number, host: string, callback?: (error?: Error) => void): Server {
      const server = createHttpServer(listener);
      if (callback) {
        let called = false;
        const once = (error?: Error) => {
          if (called) return;
          called = true;
          callback(error);
        };
        server.once("error", once);
        return server.listen(port, host, once);
      }
      return server.listen(port, host);
    },
  });
}
