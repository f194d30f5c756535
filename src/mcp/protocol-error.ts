import {
  type JSONRPCMessage,
  ProtocolError,
  ProtocolErrorCode,
  type Server,
  type ServerContext,
} from "@modelcontextprotocol/server";
import { z } from "zod";

/** The longest description of bad params a protocol error carries. */
const MAX_PARAMS_DETAIL = 300;

function shortDetail(
  issues: readonly { path?: readonly PropertyKey[]; message?: string }[],
): string {
  const detail = issues
    .map((issue) => {
      const path = (issue.path ?? []).filter((p) => p !== "params").map(String);
      return `${path.join(".") || "params"}: ${issue.message ?? "invalid"}`;
    })
    .join("; ");
  return detail.length > MAX_PARAMS_DETAIL ? `${detail.slice(0, MAX_PARAMS_DETAIL)}…` : detail;
}

/**
 * An error message that embeds a zod issue list (the SDK's "Invalid tools/call request: [ {...} ]")
 * as one short line naming each bad field; any other message as it is.
 */
export function withoutIssueDump(code: number, message: string): string {
  const at = message.indexOf(": [");
  if (code !== ProtocolErrorCode.InvalidParams || at === -1) return message;
  try {
    const issues = JSON.parse(message.slice(at + 2)) as unknown;
    if (!Array.isArray(issues)) return message;
    return `${message.slice(0, at)}: ${shortDetail(issues as z.core.$ZodIssue[])}`;
  } catch {
    return message;
  }
}

/** An error answer as it leaves: an embedded issue list becomes one short line. */
export function forTheWire<M extends JSONRPCMessage>(message: M): M {
  if (!("error" in message)) return message;
  const { code, message: text } = message.error;
  const clean = withoutIssueDump(code, text);
  return clean === text ? message : { ...message, error: { ...message.error, message: clean } };
}

/** -32602 for malformed params: which fields, briefly; never the parser's whole issue dump. */
export function invalidParams(method: string, error: z.ZodError): ProtocolError {
  return new ProtocolError(
    ProtocolErrorCode.InvalidParams,
    `Invalid params for ${method}: ${shortDetail(error.issues)}`,
  );
}

const LOOSE_PARAMS = z.looseObject({}).optional();

/**
 * Registers a handler whose params `schema` checks here, so malformed params answer -32602 with
 * a short message in both eras (the SDK's own parse answers -32603 with its whole issue list).
 */
export function onRequest<T>(
  server: Server,
  method: string,
  schema: z.ZodType<T>,
  handler: (params: T, ctx: ServerContext) => unknown,
): void {
  server.setRequestHandler(method as "tools/list", { params: LOOSE_PARAMS }, (params, ctx) => {
    const parsed = schema.safeParse(params ?? {});
    if (!parsed.success) throw invalidParams(method, parsed.error);
    return handler(parsed.data, ctx) as never;
  });
}
