import type { NextFunction, Request, Response } from "express";
import { opsLog } from "../logging/ops.js";
import { rpcError } from "./guards.js";

/**
 * What a POST body may be, and the refusals of one that is not: too large, not JSON, not UTF-8,
 * nested too deep. Every refusal is a JSON-RPC error body with a 4xx, in both protocol eras.
 */

/** The largest body express.json accepts (413 beyond), as its refusal names it, and in bytes. */
export const JSON_BODY_LIMIT_BYTES = 256 * 1024;
export const JSON_BODY_LIMIT = `${JSON_BODY_LIMIT_BYTES / 1024}kb`;

/**
 * How deep a POST body may nest (the batch array counts as one level). MCP messages need a
 * handful of levels; the limit only has to keep every later walk of the body (the SDK's, zod's,
 * JSON.stringify in an error message, the trace's) far from the stack's end.
 */
export const MAX_BODY_DEPTH = 64;

/** The refusal of a body nested deeper than MAX_BODY_DEPTH (400, -32600), in both eras. */
export const TOO_DEEP = `Invalid Request: JSON nested deeper than ${MAX_BODY_DEPTH} levels`;

/**
 * Whether `value` nests more than `limit` arrays and objects deep. Recursive, but never deeper
 * than `limit`, so it cannot overflow the stack itself; no allocation (for...in, not
 * Object.keys), no call for a primitive.
 */
export function tooDeep(value: unknown, limit: number): boolean {
  if (value === null || typeof value !== "object") return false;
  if (limit === 0) return true;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      if (item !== null && typeof item === "object" && tooDeep(item, limit - 1)) return true;
    }
    return false;
  }
  for (const key in value) {
    const item = (value as Record<string, unknown>)[key];
    if (item !== null && typeof item === "object" && tooDeep(item, limit - 1)) return true;
  }
  return false;
}

/** The refusal of a batch that repeats a request id (400, -32600), in both eras. */
export const REPEATED_ID = "Invalid Request: a request id is repeated in the batch";

/**
 * Whether a batch holds two requests with the same id. Answers are matched to requests by id, and
 * so is the SDK's own bookkeeping (abort controllers, the response of the POST), so such a batch
 * cannot be answered safely and nothing of it runs. Ids compare as JSON-RPC ids do: 1 and "1"
 * differ, 1 and 1.0 are the same number.
 */
export function repeatsId(body: unknown): boolean {
  if (!Array.isArray(body) || body.length < 2) return false;
  const seen = new Set<unknown>();
  for (const message of body) {
    if (message === null || typeof message !== "object" || !("method" in message)) continue;
    if (!("id" in message)) continue;
    const id = (message as { id: unknown }).id;
    if (seen.has(id)) return true;
    seen.add(id);
  }
  return false;
}

/**
 * A batch without the requests that a `notifications/cancelled` of the same batch names: the
 * client withdrew them before they could start, so they never run and are never answered (the
 * SDK would run each and then wait for an answer it never sends). Matched as the SDK v2 matches
 * a cancellation (any `requestId` that is an id), wherever it sits in the batch.
 */
export function withoutCancelled(body: unknown): unknown {
  if (!Array.isArray(body) || body.length < 2) return body;
  const cancelled = new Set<unknown>();
  for (const message of body) {
    if (message?.method !== "notifications/cancelled" || "id" in message) continue;
    const id: unknown = message.params?.requestId;
    if (typeof id === "string" || typeof id === "number") cancelled.add(id);
  }
  if (cancelled.size === 0) return body;
  return body.filter(
    (message) => !(message?.method !== undefined && "id" in message && cancelled.has(message.id)),
  );
}

const isClientError = (error: unknown): error is { status: number } => {
  const status = (error as { status?: unknown } | null)?.status;
  return typeof status === "number" && status >= 400 && status < 500;
};

/** Body-parser failures and anything unexpected: JSON-RPC bodies, never an HTML page or a stack. */
export function bodyRefusals(
  error: unknown,
  _req: Request,
  res: Response,
  _next: NextFunction,
): void {
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
}
