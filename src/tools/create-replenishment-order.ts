import { z } from "zod";
import { withStoreKey } from "../auth.js";
import { type ToolError, toToolError } from "../errors.js";
import type { AuditOutcome } from "../logging/records.js";
import { MAX_ORDER_QUANTITY, REASON_MAX_CHARS, reasonProblem } from "../validation.js";
import { CALL_ORDER, NOT_SUPPORTED } from "./boundaries.js";
import { skuSchema, storeDirectory, storeIdSchema, unknownStore } from "./common.js";
import { defineTool, type ToolContext } from "./define.js";

const input = z.strictObject({
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
});

type Input = z.infer<typeof input>;

const field = (raw: unknown, key: string): unknown =>
  raw !== null && typeof raw === "object" ? (raw as Record<string, unknown>)[key] : undefined;
const str = (value: unknown): string | null => (typeof value === "string" ? value : null);

async function audit(
  ctx: ToolContext,
  outcome: AuditOutcome,
  args: {
    store_id: string | null;
    sku: string | null;
    quantity: number | null;
    reason: string | null;
  },
  orderId: string | null,
  detail?: string,
): Promise<void> {
  await ctx.recorder.audit({
    ts: new Date().toISOString(),
    outcome,
    order_id: orderId,
    ...args,
    request_id: ctx.requestId,
    ...(detail === undefined ? {} : { detail }),
  });
}

/** Refusals before submission are REJECTED; a write that may have landed is UNCERTAIN. */
function outcomeOf(error: ToolError): AuditOutcome {
  return error.type === "outcome_unknown" || error.type === "internal" ? "UNCERTAIN" : "REJECTED";
}

export const createReplenishmentOrder = defineTool({
  name: "create_replenishment_order",
  title: "Create replenishment order (loads a truck)",
  description: [
    "Submit a replenishment order for one SKU at one store. This is the only tool with real-world",
    "effect: the order feeds Korral's distribution run, stock gets picked and a truck gets loaded.",
    "Orders cannot be cancelled or amended here (the buyer must contact Korral ops).",
    "Before calling: confirm store, SKU and quantity with the human buyer and get their explicit",
    "approval. Never infer or compute a quantity yourself: use the number the buyer gave.",
    "Cite the live stock numbers from get_stock_position in reason. Call it once per approved order;",
    "if the result is an error with type outcome_unknown, do not resubmit: check",
    'get_replenishment_status first. Returns order_id (RPL-<store>-<seq>), status "submitted" and a',
    "confirmation sentence to paste into Slack.",
    CALL_ORDER,
    NOT_SUPPORTED,
  ].join(" "),
  input,
  output: z.object({
    order_id: z.string().describe("RPL-<store>-<seq>"),
    status: z.enum(["submitted", "picking", "dispatched", "delivered"]),
    confirmation: z.string().describe("One sentence to paste into Slack"),
    store_id: z.string(),
    store_name: z.string(),
    sku: z.string(),
    sku_name: z.string(),
    quantity: z.number().int(),
    reason: z.string(),
    created_at: z.string(),
  }),
  annotations: {
    readOnlyHint: false,
    // Append-only: it adds an order and never destroys or overwrites data.
    destructiveHint: false,
    // Not idempotent: calling twice loads two trucks.
    idempotentHint: false,
    openWorldHint: false,
  },
  storeIdOf: ({ store_id }) => store_id,
  async onInvalidArguments(raw, error, ctx) {
    const quantity = field(raw, "quantity");
    await audit(
      ctx,
      "REJECTED",
      {
        store_id: str(field(raw, "store_id")),
        sku: str(field(raw, "sku")),
        quantity: typeof quantity === "number" ? quantity : null,
        reason: str(field(raw, "reason")),
      },
      null,
      error.message,
    );
  },
  async handler(args: Input, ctx) {
    const auditArgs = {
      store_id: args.store_id,
      sku: args.sku,
      quantity: args.quantity,
      reason: args.reason,
    };
    try {
      const [directory, item] = await Promise.all([
        storeDirectory(ctx),
        ctx.storelink.getSku(args.sku),
      ]);
      const store = directory.get(args.store_id);
      if (!store) throw unknownStore(args.store_id, directory);

      const { order } = await withStoreKey(ctx.keys, args.store_id, (key) =>
        ctx.storelink.createOrder(
          { store_id: args.store_id, sku: item.sku, quantity: args.quantity, reason: args.reason },
          key,
        ),
      );
      // The audit line is durable before the answer leaves: a crash now cannot lose the trail.
      await audit(ctx, "CREATED", auditArgs, order.order_id);
      const unit = item.unit === "kg" ? " kg of" : " x";
      return {
        order_id: order.order_id,
        status: order.status,
        confirmation: `Replenishment order ${order.order_id} submitted: ${order.quantity}${unit} ${item.name} (SKU ${item.sku}) for ${store.name} (store ${store.store_id}). Reason: ${order.reason}`,
        store_id: order.store_id,
        store_name: store.name,
        sku: item.sku,
        sku_name: item.name,
        quantity: order.quantity,
        reason: order.reason,
        created_at: order.created_at,
      };
    } catch (error) {
      const toolError = toToolError(error, ctx.requestId);
      await audit(ctx, outcomeOf(toolError), auditArgs, null, toolError.message);
      throw toolError;
    }
  },
});
