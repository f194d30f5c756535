import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import type { RequestId } from "@modelcontextprotocol/sdk/types.js";
import type { Elicit } from "../tools/define.js";

/** A buyer reading an order before approving it gets longer than the SDK's 60 s default. */
const CONFIRMATION_TIMEOUT_MS = 5 * 60_000;

/**
 * The elicitation function for one tool call, or undefined when the buyer cannot be asked: the
 * switch is off, or the client did not declare form elicitation. Stateless HTTP builds a fresh
 * server per request that never saw `initialize`, so it has no client capabilities and never
 * elicits.
 */
export function elicitorFor(
  server: Server,
  enabled: boolean,
  call: { requestId: RequestId; signal: AbortSignal },
): Elicit | undefined {
  if (!enabled || !server.getClientCapabilities()?.elicitation?.form) return undefined;
  return (params) =>
    server.elicitInput(params, {
      relatedRequestId: call.requestId,
      signal: call.signal,
      timeout: CONFIRMATION_TIMEOUT_MS,
    });
}
