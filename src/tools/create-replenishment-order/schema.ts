import { randomUUID } from "node:crypto";
import { z } from "zod";
import { MAX_ORDER_QUANTITY, REASON_MAX_CHARS, reasonProblem } from "../../policy/order-rules.js";
import { idempotencyKeySchema, skuSchema, storeIdSchema } from "../common.js";

/** The write's arguments, as the model sends them (exported for the tests' adversarial inputs). */
export const createOrderInput = z.strictObject({
  store_id: storeIdSchema,
  sku: skuSchema,
  quantity: z
    .number({ error: "must be a whole number of units" })
    .int("must be a whole number of units")
    .min(1, "must be at least 1")
    .max(
      MAX_ORDER_QUANTITY,
      `must be at most ${MAX_ORDER_QUANTITY} units; a larger order must be placed with Korral ops directly`,
    )
    .describe("Units to send, exactly as the buyer approved. Never inferred or computed from gap."),
  reason: z
    .string({ error: "is required: say why, citing the live stock numbers" })
    .max(REASON_MAX_CHARS, `must be at most ${REASON_MAX_CHARS} characters`)
    .superRefine((reason, ctx) => {
      // Too long is already said by max(); the other rules never run on such a reason.
      if (reason.length > REASON_MAX_CHARS) return;
      const problem = reasonProblem(reason);
      if (problem) {
        ctx.addIssue({
          code: "custom",
          message: `${problem}; write a sentence citing the live numbers and the buyer's approval`,
        });
      }
    })
    .describe(
      "Why, for the audit trail a human reads weeks later: at least 12 characters and 3 words, " +
        "citing the live stock numbers and the buyer's approval, e.g. \"Gap of 8 at store 47: " +
        'on_hand 3 vs 11 sold in 24h. Buyer approved 24." Placeholders (n/a, test, asap, tbd) are rejected.',
    ),
  idempotency_key: idempotencyKeySchema
    .optional()
    .describe(
      "Recommended. A fresh unique string (e.g. a UUID) per approved order. Reuse the SAME key, " +
        "with the same parameters, when retrying after an uncertain outcome (outcome_unknown, a " +
        "timeout, a lost answer): StoreLink then returns the order that landed instead of loading " +
        "a second truck. The same key with different parameters is refused. Without one, this " +
        "server makes one and gives it back when the outcome is unknown.",
    ),
  dry_run: z
    .boolean()
    .optional()
    .describe(
      "true: run every check (reason, store, SKU ranged at the store, credentials) and return " +
        "exactly what would be submitted, with the live stock numbers, without submitting " +
        "anything. Use it to show the buyer a preview before asking for approval.",
    ),
});

export type OrderInput = z.infer<typeof createOrderInput>;

/**
 * The key a create is sent with when the agent gave none: in idempotency_key's own alphabet and
 * length, so the agent can pass it back (a retry, get_replenishment_status).
 */
export const serverMadeKey = (): string => `korral-${randomUUID()}`;

const stockSchema = z.object({
  on_hand: z.number().int(),
  units_sold_last_24h: z.number().int(),
  gap: z.number().int().describe("units_sold_last_24h - on_hand"),
  reading: z.enum(["shortfall", "knife_edge", "covered"]),
  as_of: z.string(),
});

export const createOrderOutput = z
  .object({
    mode: z
      .enum(["submitted", "preview"])
      .describe(
        "submitted: an order exists (order_id, status, created_at, replayed are set). preview: " +
          "dry_run, nothing was submitted (stock is set, no order_id).",
      ),
    order_id: z.string().optional().describe("RPL-<store>-<seq>; mode submitted only"),
    status: z
      .enum(["submitted", "picking", "dispatched", "delivered"])
      .optional()
      .describe("mode submitted only"),
    created_at: z.string().optional().describe("mode submitted only"),
    replayed: z
      .boolean()
      .optional()
      .describe(
        "mode submitted only. true: this was a retry and StoreLink returned the existing order; " +
          "no new order was created",
      ),
    confirmation: z.string().describe("One sentence to paste into Slack (or the preview)"),
    store_id: z.string(),
    store_name: z.string(),
    sku: z.string(),
    sku_name: z.string(),
    quantity: z.number().int(),
    reason: z.string(),
    stock: stockSchema.optional().describe("Live stock at the store; mode preview only"),
  })
  .superRefine((out, ctx) => {
    const submitted = out.order_id && out.status && out.created_at && out.replayed !== undefined;
    if (out.mode === "submitted" ? !submitted || out.stock : !out.stock || out.order_id) {
      ctx.addIssue({ code: "custom", message: `fields do not match mode ${out.mode}` });
    }
  });
export type OrderOutput = z.infer<typeof createOrderOutput>;
