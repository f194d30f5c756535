import { z } from "zod";
import { KeySourceError, UnusableKeyError } from "./keys/provider.js";
import { StoreLinkError } from "./storelink/client.js";
import { InvalidIdError } from "./storelink/ids.js";

/**
 * The documented set of failure types a client can branch on (`structuredContent.error.type`).
 * README lists each with its meaning; keep the two in step.
 */
export const ERROR_TYPES = [
  "invalid_arguments",
  "unknown_sku",
  "unknown_store",
  "not_ranged",
  "no_credentials",
  "not_permitted",
  "auth_failed",
  "not_found",
  "idempotency_conflict",
  "not_confirmed",
  "order_cap_reached",
  "limits_unavailable",
  "policy_unavailable",
  "storelink_unavailable",
  "outcome_unknown",
  "not_created",
  "rate_limited",
  "internal",
] as const;
export type ErrorType = (typeof ERROR_TYPES)[number];

export const errorBodySchema = z.object({
  type: z.enum(ERROR_TYPES),
  message: z.string(),
  next_step: z.string(),
  retryable: z.boolean(),
});
export type ToolErrorBody = z.infer<typeof errorBodySchema>;

/**
 * The `structuredContent` of an `isError` result. Every tool's advertised outputSchema admits it
 * beside the success shape: clients validate structuredContent against it, errors included.
 * Loose, since some errors carry context (e.g. the per-store entries of a failed stock read).
 */
export const errorResultSchema = z
  .looseObject({ error: errorBodySchema })
  .describe("The result of a failed call (isError: true)");

/**
 * A failure meant for the model: a safe message, what to do next, and whether retrying can help.
 * `extra` is merged into `structuredContent` beside `error` (e.g. per-store entries).
 */
export class ToolError extends Error {
  override readonly name = "ToolError";
  constructor(
    readonly type: ErrorType,
    message: string,
    readonly nextStep: string,
    readonly retryable: boolean,
    readonly extra?: Record<string, unknown>,
    /** The original failure, for the operational log only; never shown to the model. */
    cause?: unknown,
  ) {
    super(message, cause === undefined ? undefined : { cause });
  }

  toBody(): ToolErrorBody {
    return {
      type: this.type,
      message: this.message,
      next_step: this.nextStep,
      retryable: this.retryable,
    };
  }
}

export const isToolError = (error: unknown, type?: ErrorType): error is ToolError =>
  error instanceof ToolError && (type === undefined || error.type === type);

/** What an agent is told to do about an attempt whose outcome StoreLink cannot say yet. */
const byKeyNextStep = (storeId: string, key: string): string =>
  `Do NOT place it again with a new key. In a minute, call get_replenishment_status with ` +
  `store_id ${storeId} and idempotency_key ${key}: it says whether the order was created ` +
  `(with its order_id) or never can be. Or retry this call with idempotency_key ${key} and ` +
  "the same parameters: an order that landed comes back with replayed: true, never a second " +
  "truck. This service also resolves it by itself within minutes.";

/**
 * A write sent whose outcome StoreLink could not yet confirm by its key (`outcome_unknown`, or an
 * unexpected failure once sent): the key goes back to the agent (`idempotency_key` in
 * structuredContent) with a step it can take. The type and the operator's cause are kept.
 */
export function outcomeUnknown(error: ToolError, storeId: string, key: string): ToolError {
  return new ToolError(
    error.type,
    error.type === "outcome_unknown"
      ? `${error.message} StoreLink could not yet say whether idempotency key ${key} created it.`
      : error.message,
    byKeyNextStep(storeId, key),
    false,
    { ...error.extra, idempotency_key: key },
    error.cause ?? error,
  );
}

/** A create whose key is fenced: nothing was created, and with this key nothing ever can be. */
export function notCreated(key: string): ToolError {
  return new ToolError(
    "not_created",
    `The attempt with idempotency key ${key} never created an order, and now never can: StoreLink has closed the key.`,
    "If the buyer still wants this order, confirm it with them and place it with a new idempotency_key.",
    false,
    { idempotency_key: key },
  );
}

export const noCredentials = (storeId: string): ToolError =>
  new ToolError(
    "no_credentials",
    `No credentials for store ${storeId}. Ask Korral IT for access.`,
    `Tell the buyer this server has no StoreLink key for store ${storeId}; Korral IT can grant one. Other stores are unaffected.`,
    false,
  );

export const authFailed = (storeId: string): ToolError =>
  new ToolError(
    "auth_failed",
    `Authentication failed for store ${storeId} after key reload. If it still fails, retry shortly; if it keeps failing, contact Korral IT.`,
    "Retry once in a minute; if it fails again, tell the buyer to contact Korral IT.",
    true,
  );

/**
 * The store policy does not let this caller read (or order for) the store: nothing was done
 * there. Not retryable: only Korral IT's grant changes the answer. `principal` is the caller's own
 * id (checked, see policy/principal.ts), so the buyer can tell Korral IT who is asking.
 */
export const notPermitted = (
  storeId: string,
  action: "read" | "order",
  principal: string,
): ToolError =>
  action === "read"
    ? new ToolError(
        "not_permitted",
        `Store ${storeId} is not among the stores ${principal} may read. Ask Korral IT for access.`,
        `Tell the buyer they have no access to store ${storeId}; Korral IT can grant it. Other stores are unaffected.`,
        false,
      )
    : new ToolError(
        "not_permitted",
        `${principal} may not order for store ${storeId}; nothing was submitted. Ask Korral IT for access.`,
        `Do not retry: tell the buyer they may not order for store ${storeId}; Korral IT can grant it.`,
        false,
      );

/**
 * The store policy could not be read, so it could not say whether this caller may act on the
 * store: nothing was done there (fail closed). Retryable: the operator is told, and a repaired
 * policy is read within seconds.
 */
export const policyUnavailable = (storeId: string, action: "read" | "order"): ToolError =>
  new ToolError(
    "policy_unavailable",
    action === "read"
      ? `Store ${storeId} was not read: the store access policy could not be loaded.`
      : `The store access policy could not be loaded, so the order for store ${storeId} was not submitted.`,
    action === "read"
      ? "Retry in a minute; if it keeps failing, tell the buyer to contact Korral IT. Other stores may still work."
      : "Nothing was submitted: retry the same call in a minute; if it keeps failing, tell the buyer to contact Korral IT.",
    true,
  );

/** Over the per-caller backstop: nothing was done; `retry_after_seconds` says when to retry. */
export const rateLimited = (retryAfterSeconds: number): ToolError =>
  new ToolError(
    "rate_limited",
    `Too many tool calls from this client; nothing was done. Retry in ${retryAfterSeconds} s.`,
    `Wait ${retryAfterSeconds} seconds, then retry the same call. If this keeps happening, the agent is calling tools in a loop: stop and tell the buyer.`,
    true,
    { retry_after_seconds: retryAfterSeconds },
  );

/**
 * Maps any thrown value to a ToolError. Unknown errors become `internal` with a reference only:
 * their text (and stack) may carry details the model must not see; the logs keep them.
 */
export function toToolError(error: unknown, requestId: string): ToolError {
  if (error instanceof ToolError) return error;
  if (error instanceof InvalidIdError) {
    return new ToolError(
      "invalid_arguments",
      error.message,
      "Fix the id (use the exact store_id, SKU code or order_id the tools returned) and call again; nothing was done.",
      false,
    );
  }
  if (error instanceof UnusableKeyError) {
    return new ToolError(
      "no_credentials",
      `The StoreLink key configured for store ${error.storeId} is not a usable key (it has characters an HTTP header cannot carry); nothing was sent to StoreLink.`,
      `Do not retry: it fails the same way until the key is fixed. Tell the buyer Korral IT must correct the key for store ${error.storeId}. Other stores may still work.`,
      false,
    );
  }
  if (error instanceof KeySourceError) {
    return new ToolError(
      "no_credentials",
      `Could not read the StoreLink credentials for store ${error.storeId}. Ask Korral IT for access.`,
      error.transient
        ? "Retry in a minute; if it keeps failing, tell the buyer to contact Korral IT. Other stores may still work."
        : "Tell the buyer the key configuration for this store could not be read; Korral IT must check it. Other stores may still work.",
      error.transient,
    );
  }
  if (error instanceof StoreLinkError) {
    switch (error.kind) {
      case "unknown_store":
        return new ToolError(
          "unknown_store",
          error.message,
          "Check the store id with the buyer; the store directory resource lists Korral's stores.",
          false,
        );
      case "unknown_sku":
        return new ToolError(
          "unknown_sku",
          error.message,
          "Call lookup_sku with the product name to find the right SKU code.",
          false,
        );
      case "not_ranged":
        return new ToolError(
          "not_ranged",
          error.message,
          "The store does not stock this product: not a typo, and retrying will not help. Do not order it for this store.",
          false,
        );
      case "order_not_found":
        return new ToolError(
          "not_found",
          error.message,
          "Check the order id and the store it was placed for; orders can only be read back by their own store.",
          false,
        );
      case "idempotency_key_fenced":
        return new ToolError(
          "not_created",
          "This idempotency key never created an order, and now never can: StoreLink has closed it; nothing was submitted.",
          "If the buyer still wants this order, confirm it with them and place it with a new idempotency_key.",
          false,
        );
      case "order_request_not_found":
      case "order_request_in_progress":
      case "unsupported":
        // Answers of the key read and fence, which tools turn into states before they get here.
        return new ToolError(
          "storelink_unavailable",
          "StoreLink could not say what happened to that idempotency key.",
          "Ask again in a minute; if it keeps failing, tell the buyer StoreLink cannot be asked right now.",
          true,
        );
      case "idempotency_conflict":
        return new ToolError(
          "idempotency_conflict",
          error.message,
          "Nothing was submitted. Use a new idempotency_key for a different order, or resend the original parameters unchanged.",
          false,
        );
      case "unavailable":
        return new ToolError(
          "storelink_unavailable",
          "StoreLink could not be reached; nothing was sent.",
          "Retry in a minute; if it keeps failing, tell the buyer StoreLink is unavailable.",
          true,
        );
      case "outcome_unknown":
        return new ToolError(
          "outcome_unknown",
          "The order was sent to StoreLink but no answer came back: it may or may not have been created.",
          "Do NOT resubmit. Tell the buyer the outcome is unknown and check with get_replenishment_status. Only a call that carried an idempotency_key may be retried, with that same key and the same parameters (a landed order then comes back instead of a second one); without a key, a retry can load a second truck.",
          false,
        );
      case "unauthorized":
        // Reached only if a caller bypassed the retry-once policy in auth.ts.
        return new ToolError(
          "auth_failed",
          "StoreLink rejected the credentials.",
          "Retry shortly; if it keeps failing, contact Korral IT.",
          true,
        );
    }
  }
  return new ToolError(
    "internal",
    `Internal error in the Korral StoreLink server (reference ${requestId}).`,
    `Retry once; if it fails again, give Korral IT the reference ${requestId}.`,
    true,
    undefined,
    error,
  );
}
