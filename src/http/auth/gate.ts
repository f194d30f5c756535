import type { IncomingMessage } from "node:http";
import {
  type AuthInfo,
  bearerAuthChallengeResponse,
  getOAuthProtectedResourceMetadataUrl,
  OAuthError,
  OAuthErrorCode,
  verifyBearerToken,
} from "@modelcontextprotocol/server";
import type { NextFunction, Request, RequestHandler, Response } from "express";
import type { AuthSettings } from "../../config/auth.js";
import { callRecord, verifiedOrigin } from "../../logging/call-record.js";
import { opsLog } from "../../logging/ops.js";
import type { CallRecorder } from "../../logging/records.js";
import { traceFieldsOf } from "../../logging/trace-context.js";
import { newRequestId } from "../../mcp/call-tool.js";
import { SERVER_NAME } from "../../mcp/server.js";
import { unscopedWrite } from "../../policy/audit.js";
import type { ToolName } from "../../tools/names.js";
import { tokenCache } from "./token-cache.js";
import { AuthUnavailable, tokenVerifier, type Verified } from "./verify.js";

/**
 * The resource server (MCP authorization, RFC 9728 / 6750 / 8707) in front of POST /mcp, built
 * from configuration only: every URL it names (the metadata document, the challenge's
 * `resource_metadata`) comes from KORRAL_OAUTH_RESOURCE, never from the request's Host.
 *
 * - `authenticate` (before the body is read): the credential is `X-Serverless-Authorization` when
 *   present (the header Cloud Run checked in preference), else `Authorization`; a missing or bad
 *   token is 401 with the SDK's `WWW-Authenticate: Bearer` challenge, a token without the read
 *   scope 403 `insufficient_scope`;
 * - `requireWriteScope` (after it): any request or batch element calling the write (preview
 *   included) without the order scope is 403 `insufficient_scope` naming both scopes, so the
 *   client asks the buyer for more (step-up), before anything of the batch runs; each such write
 *   is audited REJECTED, saying who, before the 403 leaves.
 * The token itself is dropped once checked: it never reaches StoreLink, a log, a trace or an
 * answer (the cache holds its SHA-256 only).
 */
export interface AuthGate {
  /** The RFC 9728 document's paths (none in google-only mode: no authorization server). */
  readonly metadataPaths: readonly string[];
  readonly metadata: RequestHandler;
  readonly authenticate: RequestHandler;
  /**
   * `authenticate`'s verdict without its answer: true once the request's caller is verified (as
   * `authenticate` would let it through); false for anything it would refuse or could not check.
   */
  accepts(req: IncomingMessage): Promise<boolean>;
  readonly requireWriteScope: RequestHandler;
  /** Whether `requireWriteScope` lets this request's body through. */
  mayWrite(req: IncomingMessage, body: unknown): boolean;
  /** The verified caller of a request `authenticate` let through. */
  verifiedOf(req: IncomingMessage): Verified | undefined;
  /** Reads the issuer's metadata now, so the first call does not wait for it. */
  warm(): void;
}

/** The write: the one tool that needs the order scope. */
const WRITE_TOOL: ToolName = "create_replenishment_order";
/** Verified tokens kept (one per client per token lifetime: a few hundred in practice). */
const CACHE_LIMIT = 10_000;
/** The fixed RFC 9728 paths: the root and this server's `/mcp`. */
const METADATA_PATHS = [
  "/.well-known/oauth-protected-resource",
  "/.well-known/oauth-protected-resource/mcp",
];

/** Sends a web Response (the SDK's challenge) through Express. */
async function send(res: Response, response: globalThis.Response): Promise<void> {
  res.status(response.status);
  response.headers.forEach((value, name) => {
    res.setHeader(name, value);
  });
  res.end(await response.text());
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === "object" && !Array.isArray(value);

/** The arguments of each call of the write in `body` (one message or a batch), in order. */
export function writesIn(body: unknown): unknown[] {
  const messages = Array.isArray(body) ? body : [body];
  return messages.flatMap((m) =>
    isObject(m) && m.method === "tools/call" && isObject(m.params) && m.params.name === WRITE_TOOL
      ? [m.params.arguments]
      : [],
  );
}

/** `recorder`: where a write refused for its scope is audited (the app's). */
export function authGate(settings: AuthSettings, recorder: CallRecorder): AuthGate {
  const oauth = settings.kinds.includes("oauth");
  const { readScope, orderScope } = settings;
  const resourceMetadataUrl = oauth
    ? getOAuthProtectedResourceMetadataUrl(new URL(settings.resource))
    : undefined;
  const { verify, warm } = tokenVerifier(settings);
  const cache = tokenCache<Verified>(CACHE_LIMIT);
  const verified = new WeakMap<IncomingMessage, Verified>();
  const options = { ...(resourceMetadataUrl ? { resourceMetadataUrl } : {}) };

  // The SDK's verifier interface: the token goes in, an AuthInfo without it comes out.
  const verifier = {
    async verifyAccessToken(token: string): Promise<AuthInfo> {
      let found = cache.get(token);
      if (found === undefined) {
        found = await verify(token);
        cache.set(token, found, found.expiresAt);
      }
      return {
        token: "",
        clientId: found.principal,
        scopes: [...found.scopes],
        expiresAt: found.expiresAt,
        extra: { verified: found },
      };
    },
  };

  const metadataPaths = oauth
    ? [...new Set([...METADATA_PATHS, new URL(resourceMetadataUrl ?? "").pathname])]
    : [];
  const document = oauth
    ? {
        resource: settings.resource,
        authorization_servers: [settings.issuer],
        scopes_supported: [readScope, orderScope],
        bearer_methods_supported: ["header"],
        resource_name: SERVER_NAME,
      }
    : {};

  /**
   * Verifies the request's token (with the read scope) and keeps who it names for the request.
   * Once per request: the direct way in asks first and Express's `authenticate` then reuses the
   * verdict, so a refused token is never verified twice.
   */
  const verifications = new WeakMap<IncomingMessage, Promise<void>>();
  const verifyRequest = (req: IncomingMessage): Promise<void> => {
    let verification = verifications.get(req);
    if (verification === undefined) {
      const serverless = req.headers["x-serverless-authorization"];
      const header = typeof serverless === "string" ? serverless : req.headers.authorization;
      verification = verifyBearerToken(header, {
        verifier,
        requiredScopes: [readScope],
        ...options,
      }).then((info) => {
        verified.set(req, (info.extra as { verified: Verified }).verified);
      });
      verifications.set(req, verification);
    }
    return verification;
  };

  const authenticate = (req: Request, res: Response, next: NextFunction): void => {
    verifyRequest(req).then(
      () => next(),
      (error: unknown) => {
        if (error instanceof AuthUnavailable) {
          res.setHeader("Retry-After", "5");
          res
            .status(503)
            .json({ error: "temporarily_unavailable", error_description: error.message });
          return;
        }
        const description = error instanceof OAuthError ? error.message : "unexpected";
        opsLog.debug(
          { status: "refused", reason: description },
          "HTTP authentication refused a request",
        );
        void send(
          res,
          bearerAuthChallengeResponse(error, { requiredScopes: [readScope], ...options }),
        );
      },
    );
  };

  const writeScopes = [readScope, orderScope];
  const hasWriteScopes = (who: Verified): boolean =>
    writeScopes.every((s) => who.scopes.includes(s));
  /** What requireWriteScope lets through: no write, or a caller with both scopes. */
  const mayWrite = (req: IncomingMessage, body: unknown): boolean => {
    const who = verified.get(req);
    return who === undefined || hasWriteScopes(who) || writesIn(body).length === 0;
  };
  const requireWriteScope = (req: Request, res: Response, next: NextFunction): void => {
    const who = verified.get(req);
    if (who === undefined || mayWrite(req, req.body)) {
      next();
      return;
    }
    const denied = new OAuthError(
      OAuthErrorCode.InsufficientScope,
      `${WRITE_TOOL} needs the ${orderScope} scope`,
    );
    // Each refused write is an attempt the audit keeps, with who: the record of a call that never
    // ran, built as every call's is.
    const origin = verifiedOrigin(who, traceFieldsOf(req.headers));
    const never = new AbortController().signal;
    const audited = writesIn(req.body).map((args) =>
      recorder.audit(
        unscopedWrite(callRecord(origin, newRequestId(), WRITE_TOOL, args, never), orderScope),
        origin.traceFields,
      ),
    );
    void Promise.allSettled(audited).then(() =>
      send(res, bearerAuthChallengeResponse(denied, { requiredScopes: writeScopes, ...options })),
    );
  };

  return {
    metadataPaths,
    metadata: (_req, res) => {
      res.setHeader("Access-Control-Allow-Origin", "*");
      res.json(document);
    },
    authenticate,
    accepts: (req) =>
      verifyRequest(req).then(
        () => true,
        () => false,
      ),
    requireWriteScope,
    mayWrite,
    verifiedOf: (req) => verified.get(req),
    warm,
  };
}
