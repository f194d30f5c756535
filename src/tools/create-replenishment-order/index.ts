import { CALL_ORDER, NOT_SUPPORTED } from "../boundaries.js";
import { defineTool } from "../define.js";
import { auditRefusal, placeOrder } from "./flow.js";
import { createOrderInput, createOrderOutput } from "./schema.js";

/**
 * The one write: it loads a truck. Its parts: schema.ts (what the model sends and gets back),
 * preview.ts (the live read and the dry run), confirmation.ts (asking the buyer, in both protocol
 * eras), flow.ts (the order of the checks and the audit line); what may refuse or count a write
 * is in src/policy/.
 */
export const createReplenishmentOrder = defineTool({
  name: "create_replenishment_order",
  title: "Create replenishment order (loads a truck)",
  description: [
    "Submit a replenishment order for one SKU at one store. This is the only tool with real-world",
    "effect: the order feeds Korral's distribution run, stock gets picked and a truck gets loaded.",
    "Orders cannot be cancelled or amended here (the buyer must contact Korral ops).",
    "Before calling: confirm store, SKU and quantity with the human buyer and get their explicit",
    "approval. Never infer or compute a quantity yourself: use the number the buyer gave.",
    "Cite the live stock numbers from get_stock_position in reason. dry_run: true returns a",
    "preview of exactly what would be sent, submitting nothing. Clients that support it are asked",
    "to confirm with the buyer before anything is sent. Call it once per approved order with a",
    "fresh idempotency_key; if the result is outcome_unknown, retry only with the same key (yours,",
    "or the idempotency_key the result returns) and parameters (the landed order comes back with",
    "replayed: true), or check get_replenishment_status with that idempotency_key. A repeat without",
    "the key is a new order: it can load a second truck. A per-hour limit per store and SKU guards",
    "against loops; a retry with the same key never takes a second place under it.",
    'Returns order_id (RPL-<store>-<seq>), status "submitted" and a confirmation sentence to paste',
    "into Slack.",
    CALL_ORDER,
    NOT_SUPPORTED,
  ].join(" "),
  input: createOrderInput,
  output: createOrderOutput,
  annotations: {
    readOnlyHint: false,
    // Append-only: it adds an order and never destroys or overwrites data.
    destructiveHint: false,
    // Only a repeat with the same idempotency_key is promised to fold (StoreLink's contract); a
    // client cannot rely on that for every repeat, so this stays false.
    idempotentHint: false,
    openWorldHint: false,
  },
  storeIdOf: ({ store_id }) => store_id,
  onRefused: auditRefusal,
  handler: placeOrder,
});
