import { z } from "zod";
import { ToolError } from "../errors.js";
import { scrubSentKeys } from "../keys/sent-keys.js";
import type { CallRecord } from "../logging/call-record.js";
import { opsLog } from "../logging/ops.js";
import {
  type PolicyAction,
  refusalOf,
  type SOME_CATEGORY,
  type StorePolicy,
} from "../policy/store-policy.js";
import type { Sku, Store, StoreLinkClient } from "../storelink/client.js";
import { checkedSku, checkedSkus, checkedStores } from "../storelink/contract.js";
import { ID_PATTERN, ID_RULE } from "../storelink/ids.js";
import type { ToolContext } from "./define.js";

/**
 * A whole number where text is expected. Models and the Inspector CLI send `sku=8847291` as the
 * number 8847291; its decimal text is the id. Only non-negative safe integers: a float, a negative
 * number or one past 2^53 has no exact decimal text worth trusting, so it stays refused.
 */
const wholeNumber = z
  .int({
    // z.int() is a safe integer: a whole number past 2^53 is refused here too.
    error: (issue) =>
      Number.isInteger(issue.input)
        ? `must be at most ${Number.MAX_SAFE_INTEGER} as a number; send a longer id as a string`
        : "must be a whole number",
  })
  .min(0, "must not be negative");

/**
 * Text or a whole number, handed on as text. The union's own message replaces zod's generic
 * "Invalid input" for any other type (boolean, object, null, float).
 */
function textOrWholeNumber(text: z.ZodString, example: string) {
  return z
    .union([text, wholeNumber], {
      error: (issue) =>
        issue.code === "invalid_union"
          ? `must be a string such as ${example} (a whole number is also accepted)`
          : undefined,
    })
    .transform((value) => (typeof value === "number" ? String(value) : value));
}

/**
 * An id that becomes a StoreLink path segment: the shared rule of storelink/ids.ts, so `.`, `..`,
 * slashes, whitespace and control characters are refused here as invalid arguments, before any
 * StoreLink call. The JSON Schema carries the same pattern for clients that check it. The
 * pattern needs at least one character, so its message also covers an empty id.
 */
function idText(maxLength: number, typeError?: string): z.ZodString {
  return z
    .string(typeError === undefined ? undefined : { error: typeError })
    .trim()
    .max(maxLength, `must be at most ${maxLength} characters`)
    .regex(ID_PATTERN, `must be 1 to ${maxLength} characters: ${ID_RULE}`);
}

export const storeIdSchema = textOrWholeNumber(idText(32), '"47"').describe(
  'Korral store id, a string such as "47" (a whole number such as 47 is also accepted)',
);

export const skuSchema = textOrWholeNumber(idText(32), '"8847291"').describe(
  'SKU code from lookup_sku, e.g. "8847291" (a whole number such as 8847291 is also accepted)',
);

/**
 * Order ids are always text (RPL-<store>-<seq>, per the contract's pattern), so a number is
 * never one: it is refused with a message saying what an order id looks like.
 */
export const orderIdSchema = idText(
  64,
  'must be a string such as "RPL-47-001", the order_id create_replenishment_order returned',
).describe('Order id as returned by create_replenishment_order, e.g. "RPL-47-001"');

/** A create's idempotency key: the agent's, or one this server made (serverMadeKey). */
export const idempotencyKeySchema = z
  .string()
  .trim()
  .min(8, "must be at least 8 characters; use a fresh UUID per approved order")
  .max(128, "must be at most 128 characters")
  .regex(/^[A-Za-z0-9._:-]+$/, "may contain only letters, digits and . _ : -");

/** Free text for lookup_sku: a name fragment or the start of a SKU code, which may be a number. */
export const querySchema = textOrWholeNumber(
  z
    .string()
    .trim()
    .min(1, "must not be empty: give part of a product name or a SKU code")
    .max(100, "must be at most 100 characters"),
  '"butter" or "8847"',
).describe(
  'Part of a product name ("butter") or the start of a SKU code ("8847"; a whole number is also accepted)',
);

/**
 * The store directory as a map, read once per call. It is sent without a key, but StoreLink has
 * seen keys in other calls: its text is scrubbed of every key this process has sent, then checked.
 */
export async function storeDirectory(ctx: ToolContext): Promise<Map<string, Store>> {
  const stores = await directoryOf(ctx.storelink);
  return new Map(stores.map((s) => [s.store_id, s]));
}

/** The directory's stores, scrubbed and checked (also the korral://stores resource's). */
export async function directoryOf(storelink: StoreLinkClient): Promise<Store[]> {
  return checkedStores(scrubSentKeys(await storelink.listStores()));
}

/** One catalogue entry, scrubbed and checked as the directory is; it must be the SKU asked for. */
export async function catalogueItem(ctx: ToolContext, sku: string): Promise<Sku> {
  return checkedSku(scrubSentKeys(await ctx.storelink.getSku(sku)), sku);
}

/** Catalogue matches, scrubbed and checked as the directory is. */
export async function catalogueMatches(ctx: ToolContext, query: string): Promise<Sku[]> {
  return checkedSkus(scrubSentKeys(await ctx.storelink.lookupSku(query)));
}

export function unknownStore(storeId: string, directory: Map<string, Store>): ToolError {
  const known = [...directory.values()].map((s) => `${s.store_id} (${s.name})`).join(", ");
  return new ToolError(
    "unknown_store",
    `Unknown store ${storeId}. Korral stores: ${known}.`,
    "Check the store id with the buyer and use one of the listed ids.",
    false,
  );
}

/**
 * The store policy's word on one action at one store for this call's principal: returns when it
 * is allowed, throws `not_permitted` or `policy_unavailable` when not. A refusal that shadow mode
 * lets through goes to the ops log, naming who, what and where (never an argument's text).
 */
export function checkAccess(
  policy: StorePolicy,
  call: CallRecord,
  action: PolicyAction,
  storeId: string,
  category?: string | typeof SOME_CATEGORY,
): void {
  const who = { id: call.by, idpGroups: call.groups };
  const decision = policy.may(who, action, storeId, category);
  if (decision.verdict === "shadow") {
    opsLog.warn(
      { request_id: call.requestId, by: call.by, action, tool: call.tool, ...call.traceFields },
      decision.reason,
    );
  }
  const refusal = refusalOf(decision, who, action, storeId);
  if (refusal) throw refusal;
}
