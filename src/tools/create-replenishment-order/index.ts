import { inputRequired, inputResponse } from "@modelcontextprotocol/server";
import { z } from "zod";
import { withStoreKey } from "../../auth.js";
import { ToolError, toToolError } from "../../errors.js";
import type { AuditOutcome, Confirmer } from "../../logging/records.js";
import type { Reservation } from "../../policy/order-cap.js";
import {
  gapOf,
  MAX_ORDER_QUANTITY,
  REASON_MAX_CHARS,
  reasonProblem,
} from "../../policy/order-rules.js";
import {
  newNonce,
  nonceIdempotencyKey,
  orderDigest,
  REQUEST_STATE_TTL_SECONDS,
} from "../../policy/request-state.js";
import type { Sku, StockReading, Store } from "../../storelink/client.js";
import { CALL_ORDER, NOT_SUPPORTED } from "../boundaries.js";
import {
  type RawOrderFields,
  rawOrderFields,
  skuSchema,
  storeDirectory,
  storeIdSchema,
  unknownStore,
} from "../common.js";
import { AskBuyer, defineTool, type Rounds, type ToolContext } from "../define.js";

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
  idempotency_key: z
    .string()
    .trim()
    .min(8, "must be at least 8 characters; use a fresh UUID per approved order")
    .max(128, "must be at most 128 characters")
    .regex(/^[A-Za-z0-9._:-]+$/, "may contain only letters, digits and . _ : -")
    .optional()
    .describe(
      "Recommended. A fresh unique string (e.g. a UUID) per approved order. Reuse the SAME key, " +
        "with the same parameters, when retrying after an uncertain outcome (outcome_unknown, a " +
        "timeout, a lost answer): StoreLink then returns the order that landed instead of loading " +
        "a second truck. The same key with different parameters is refused.",
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

type Input = z.infer<typeof createOrderInput>;

const stockSchema = z.object({
  on_hand: z.number().int(),
  units_sold_last_24h: z.number().int(),
  gap: z.number().int().describe("units_sold_last_24h - on_hand"),
  reading: z.enum(["shortfall", "knife_edge", "covered"]),
  as_of: z.string(),
});

const output = z
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
type Output = z.infer<typeof output>;

async function audit(
  ctx: ToolContext,
  outcome: AuditOutcome,
  args: RawOrderFields,
  orderId: string | null,
  detail?: string,
  confirmed?: Confirmer,
): Promise<void> {
  await ctx.recorder.audit(
    {
      ts: new Date().toISOString(),
      outcome,
      order_id: orderId,
      ...args,
      request_id: ctx.requestId,
      ...(detail === undefined ? {} : { detail }),
      ...(confirmed === undefined ? {} : { confirmed }),
    },
    ctx.traceFields,
  );
}

/**
 * How far a create got: `checking` until the order is handed to StoreLink's createOrder (store,
 * SKU, cap, confirmation, key lookup), `sent` from then on.
 */
type Stage = "checking" | "sent";

/**
 * Refusals before submission are REJECTED; a write that may have landed is UNCERTAIN. An
 * unexpected error (`internal`) is UNCERTAIN only once the write was handed to createOrder:
 * before that nothing can have been written.
 */
function outcomeOf(error: ToolError, stage: Stage): AuditOutcome {
  if (error.type === "outcome_unknown") return "UNCERTAIN";
  if (error.type === "internal" && stage === "sent") return "UNCERTAIN";
  return "REJECTED";
}

const NO_RESERVATION: Reservation = { commit() {}, release() {} };

function capReached(
  store: Store,
  item: Sku,
  limit: number,
  { placed, inFlight }: { placed: number; inFlight: number },
): ToolError {
  const pending =
    inFlight > 0
      ? `, and ${inFlight} more ${inFlight === 1 ? "is" : "are"} being submitted now`
      : "";
  return new ToolError(
    "order_cap_reached",
    `Order limit reached: this server allows ${limit} orders an hour for ${item.name} ` +
      `(SKU ${item.sku}) at ${store.name} (store ${store.store_id}); ${placed} ${placed === 1 ? "was" : "were"} ` +
      `placed in the last hour${pending}. Nothing was submitted. If the volume is real, contact Korral ops to place it.`,
    "Do not retry. Tell the buyer the hourly limit was reached and that Korral ops can place " +
      "the order if the volume is real; check the earlier orders with get_replenishment_status.",
    false,
  );
}

const describeStock = (s: StockReading): string => {
  const { gap } = gapOf(s.on_hand, s.units_sold_last_24h);
  return `on_hand ${s.on_hand}, ${s.units_sold_last_24h} sold in the last 24h, gap ${gap > 0 ? "+" : ""}${gap}`;
};

const amount = (quantity: number, item: Sku): string =>
  `${quantity}${item.unit === "kg" ? " kg of" : " x"} ${item.name} (SKU ${item.sku})`;

/** The live reading: proves the key works and the SKU is ranged, and gives the buyer numbers. */
const readStock = (args: Input, ctx: ToolContext, item: Sku): Promise<StockReading> =>
  withStoreKey(ctx.keys, args.store_id, (key) =>
    ctx.storelink.getStock(args.store_id, item.sku, key),
  );

/**
 * The live reading, for an order that would not be refused by the cap: what a preview and round 1
 * show the buyer. Holds no slot (the write itself takes one).
 */
async function readStockUnderCap(
  args: Input,
  ctx: ToolContext,
  store: Store,
  item: Sku,
): Promise<StockReading> {
  const stock = await readStock(args, ctx, item);
  const cap = ctx.orderCap;
  if (cap?.isFull(store.store_id, item.sku)) {
    throw capReached(store, item, cap.perHour, cap.counts(store.store_id, item.sku));
  }
  return stock;
}

/** How much of the reason the confirmation shows; the audit line keeps all of it. */
export const CONFIRM_REASON_MAX_CHARS = 200;

/**
 * Characters that could break the reason out of its one line or hide what it says, by Unicode
 * class rather than a list: controls (Cc: C0, C1, DEL, with CR, LF, VT, FF, NEL), format
 * characters (Cf: bidi embeddings, overrides and isolates, zero-width joiners, tag characters,
 * the soft hyphen), the line and paragraph separators (Zl, Zp), surrogates (Cs: a lone half
 * renders as nothing), private use (Co) and unassigned code points (Cn, noncharacters among them),
 * every default-ignorable code point (the Hangul fillers such as U+3164, variation selectors,
 * the combining grapheme joiner), and the blank Braille pattern U+2800.
 */
const UNSAFE_IN_LINE =
  /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}\p{Co}\p{Cn}\p{Default_Ignorable_Code_Point}\u2800]/u;

/** `\uXXXX`, or `\u{XXXXX}` beyond the Basic Multilingual Plane (a tag character, say). */
const escapeCodePoint = (code: number): string =>
  code > 0xffff ? `\\u{${code.toString(16)}}` : `\\u${code.toString(16).padStart(4, "0")}`;

/**
 * The reason as one quoted line: every line break and control escaped as \uXXXX (so a reason
 * cannot start a line of its own and imitate "Quantity: ..."), quotes and backslashes escaped
 * (so it cannot close its quotes), and at most CONFIRM_REASON_MAX_CHARS characters shown.
 */
export function quotedLine(text: string, max = CONFIRM_REASON_MAX_CHARS): string {
  const chars = Array.from(text);
  const shown = chars.length > max ? chars.slice(0, max).join("") : text;
  let escaped = "";
  for (const c of shown) {
    const code = c.codePointAt(0) ?? 0;
    if (c === "\\" || c === '"') escaped += `\\${c}`;
    else if (UNSAFE_IN_LINE.test(c)) escaped += escapeCodePoint(code);
    else escaped += c;
  }
  const more = chars.length - max;
  return `"${escaped}"${more > 0 ? ` (${more} more characters not shown)` : ""}`;
}

/**
 * What the buyer is asked to confirm. The facts (store, SKU, quantity) come first and again as
 * the last line, where a client shows the tick box; the reason, which the agent wrote, is one
 * quoted, capped line between them, labelled as the agent's words, so it can neither push the
 * facts off screen nor pass for them.
 */
export function confirmationMessage(
  args: Pick<Input, "quantity" | "reason">,
  store: Store,
  item: Sku,
  stock: StockReading,
): string {
  const quantity = `${args.quantity}${item.unit === "kg" ? " kg" : ""}`;
  return [
    "Confirm this replenishment order. It loads a truck and cannot be cancelled here.",
    `Store: ${store.store_id} (${store.name})`,
    `SKU: ${item.sku} (${item.name})`,
    `Quantity: ${quantity}`,
    `Live stock: ${describeStock(stock)}`,
    `Reason given by the agent (quoted, one line): ${quotedLine(args.reason)}`,
    `You are confirming: ${amount(args.quantity, item)} for store ${store.store_id} (${store.name}).`,
  ].join("\n");
}

/** The one question of the confirmation dialog: a tick box, unticked by default. */
const CONFIRM_SCHEMA = {
  type: "object" as const,
  properties: {
    confirm: {
      type: "boolean" as const,
      title: "Submit this order",
      description: "Tick to send the order to StoreLink exactly as shown.",
      default: false,
    },
  },
  required: ["confirm"],
};

type Answer = "accept" | "decline" | "cancel" | "no answer";

const answerOf = (action: string, content: Record<string, unknown> | undefined): Answer =>
  action === "accept"
    ? content?.confirm === true
      ? "accept"
      : "decline"
    : action === "decline" || action === "cancel"
      ? action
      : "no answer";

function notConfirmed(answer: Exclude<Answer, "accept">): ToolError {
  const how = answer === "decline" ? "declined" : answer === "cancel" ? "cancelled" : "no answer";
  return new ToolError(
    "not_confirmed",
    `The buyer did not confirm the order (${how}); nothing was submitted.`,
    "Do not resubmit on your own. Ask the buyer whether they want a different store, SKU, quantity or reason.",
    false,
  );
}

/** Asks the buyer through the client (a 2025 session); anything but an explicit yes sends nothing. */
async function confirmWithBuyer(
  args: Input,
  ctx: ToolContext,
  elicit: NonNullable<ToolContext["elicit"]>,
  store: Store,
  item: Sku,
): Promise<void> {
  const stock = await readStock(args, ctx, item);
  const message = confirmationMessage(args, store, item, stock);
  let answer: Answer;
  try {
    const result = await elicit({ mode: "form", message, requestedSchema: CONFIRM_SCHEMA });
    answer = answerOf(result.action, result.content);
  } catch {
    // Timeout, disconnect or a malformed answer: not a yes.
    answer = "no answer";
  }
  if (answer !== "accept") throw notConfirmed(answer);
}

/**
 * Round 1 of a 2026-07-28 write: every check has passed (the cap, and the live read proves the
 * key and the ranging); answer `input_required` with the true order and signed state.
 */
async function askBuyer(
  args: Input,
  ctx: ToolContext,
  rounds: Rounds,
  store: Store,
  item: Sku,
): Promise<never> {
  const stock = await readStockUnderCap(args, ctx, store, item);
  const requestState = await rounds.signer.mint(
    { nonce: newNonce(), args: orderDigest(args) },
    ctx.caller,
  );
  throw new AskBuyer(
    inputRequired({
      inputRequests: {
        confirm: inputRequired.elicit({
          mode: "form",
          message: confirmationMessage(args, store, item, stock),
          requestedSchema: CONFIRM_SCHEMA,
        }),
      },
      requestState,
    }),
  );
}

const badState = (why: string): ToolError =>
  new ToolError(
    "not_confirmed",
    `The confirmation for this order ${why}; nothing was submitted.`,
    "Call create_replenishment_order again with the order the buyer approved, so the buyer is " +
      "asked afresh; do not reuse or edit a requestState.",
    false,
  );

/**
 * Round 2: the state must be this server's, unexpired, this caller's and for exactly these order
 * fields, and the buyer's answer an explicit yes. Returns the idempotency key of the write: the
 * agent's, else one derived from the state's nonce, so a replayed round 2 folds at StoreLink.
 */
async function confirmedByState(args: Input, ctx: ToolContext, rounds: Rounds): Promise<string> {
  let state: Awaited<ReturnType<Rounds["signer"]["verify"]>>;
  try {
    state = await rounds.signer.verify(rounds.state ?? "");
  } catch (error) {
    throw badState(
      error instanceof Error && error.message === "expired"
        ? `expired (the buyer has ${REQUEST_STATE_TTL_SECONDS / 60} minutes to answer)`
        : "is not valid (altered, or signed by another server)",
    );
  }
  if (!rounds.signer.isCaller(state, ctx.caller)) {
    throw badState("was issued to another caller");
  }
  if (state.args !== orderDigest(args)) {
    throw badState("was for different order details than these");
  }
  const view = inputResponse(rounds.responses, "confirm");
  const answer: Answer =
    view.kind === "elicit"
      ? answerOf(view.action, view.content as Record<string, unknown> | undefined)
      : "no answer";
  if (answer !== "accept") throw notConfirmed(answer);
  return args.idempotency_key ?? nonceIdempotencyKey(state.nonce);
}

function confirmationRequired(): ToolError {
  return new ToolError(
    "not_confirmed",
    "This server requires the buyer to confirm every order, and this client cannot ask them " +
      "(it declared no form elicitation); nothing was submitted.",
    "Tell the buyer to place the order from a client that can show a confirmation dialog: an " +
      "MCP 2026-07-28 client with form elicitation, or Claude Desktop over stdio.",
    false,
  );
}

async function preview(args: Input, ctx: ToolContext, store: Store, item: Sku): Promise<Output> {
  const stock = await readStockUnderCap(args, ctx, store, item);
  const { gap, reading } = gapOf(stock.on_hand, stock.units_sold_last_24h);
  const { store_id, quantity, reason } = args;
  await audit(ctx, "PREVIEW", { store_id, sku: item.sku, quantity, reason }, null);
  return {
    mode: "preview",
    confirmation: `Preview only, nothing submitted: would order ${amount(args.quantity, item)} for ${store.name} (store ${store.store_id}). Live stock: ${describeStock(stock)}. Reason: ${args.reason}`,
    store_id: store.store_id,
    store_name: store.name,
    sku: item.sku,
    sku_name: item.name,
    quantity: args.quantity,
    reason: args.reason,
    stock: {
      on_hand: stock.on_hand,
      units_sold_last_24h: stock.units_sold_last_24h,
      gap,
      reading,
      as_of: stock.as_of,
    },
  };
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
    "Cite the live stock numbers from get_stock_position in reason. dry_run: true returns a",
    "preview of exactly what would be sent, submitting nothing. Clients that support it are asked",
    "to confirm with the buyer before anything is sent. Call it once per approved order with a",
    "fresh idempotency_key; if the result is outcome_unknown, retry only with the same key and",
    "parameters (the landed order comes back with replayed: true) or check",
    "get_replenishment_status. Without a key nothing guarantees a repeat is recognised: it can",
    "load a second truck. A per-hour limit per store and SKU guards against loops; retries count",
    "towards it until StoreLink answers replayed: true.",
    'Returns order_id (RPL-<store>-<seq>), status "submitted" and a confirmation sentence to paste',
    "into Slack.",
    CALL_ORDER,
    NOT_SUPPORTED,
  ].join(" "),
  input: createOrderInput,
  output,
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
  async onRefused(raw, error, ctx) {
    await audit(ctx, "REJECTED", rawOrderFields(raw), null, error.message);
  },
  async handler(args: Input, ctx): Promise<Output> {
    const auditArgs = {
      store_id: args.store_id,
      sku: args.sku,
      quantity: args.quantity,
      reason: args.reason,
    };
    let stage: Stage = "checking";
    try {
      const [directory, item] = await Promise.all([
        storeDirectory(ctx),
        ctx.storelink.getSku(args.sku),
      ]);
      const store = directory.get(args.store_id);
      if (!store) throw unknownStore(args.store_id, directory);
      if (args.dry_run === true) return await preview(args, ctx, store, item);

      // Who confirms: the buyer through round 2's answer, or the 2025 dialog below; else only the
      // agent's word, which KORRAL_REQUIRE_CONFIRMATION refuses.
      const rounds = ctx.rounds;
      if (rounds && rounds.state === undefined) await askBuyer(args, ctx, rounds, store, item);
      let idempotencyKey = args.idempotency_key;
      let confirmed: Confirmer = "agent";
      if (rounds) {
        idempotencyKey = await confirmedByState(args, ctx, rounds);
        confirmed = "buyer";
      } else if (ctx.elicit) {
        confirmed = "buyer";
      } else if (ctx.requireConfirmation) {
        throw confirmationRequired();
      }

      // Every create holds a slot, retries too: the cap never counts on StoreLink folding one.
      const held = ctx.orderCap?.reserve(store.store_id, item.sku) ?? {
        ok: true as const,
        reservation: NO_RESERVATION,
      };
      if (!held.ok) throw capReached(store, item, held.limit, held);

      let created: Awaited<ReturnType<typeof ctx.storelink.createOrder>>;
      try {
        if (ctx.elicit) await confirmWithBuyer(args, ctx, ctx.elicit, store, item);
        created = await withStoreKey(ctx.keys, args.store_id, (key) => {
          stage = "sent";
          ctx.onSend?.();
          return ctx.storelink.createOrder(
            {
              store_id: args.store_id,
              sku: item.sku,
              quantity: args.quantity,
              reason: args.reason,
              ...(idempotencyKey === undefined ? {} : { idempotency_key: idempotencyKey }),
            },
            key,
          );
        });
      } catch (error) {
        // An order that may have landed counts against the cap; a refusal does not.
        if (outcomeOf(toToolError(error, ctx.requestId), stage) === "UNCERTAIN") {
          held.reservation.commit();
        } else held.reservation.release();
        throw error;
      }
      const { order, replayed } = created;
      if (replayed) held.reservation.release();
      else held.reservation.commit();

      // The audit line is durable before the answer leaves: a crash now cannot lose the trail.
      // A replay is recorded as REPLAYED against the original order, never a second CREATED.
      await audit(
        ctx,
        replayed ? "REPLAYED" : "CREATED",
        auditArgs,
        order.order_id,
        undefined,
        confirmed,
      );
      const what = `${amount(order.quantity, item)} for ${store.name} (store ${store.store_id})`;
      return {
        mode: "submitted",
        order_id: order.order_id,
        status: order.status,
        created_at: order.created_at,
        replayed,
        confirmation: replayed
          ? `Replenishment order ${order.order_id} was already submitted at ${order.created_at}: ${what}. This request was a retry; no new order was created. Reason: ${order.reason}`
          : `Replenishment order ${order.order_id} submitted: ${what}. Reason: ${order.reason}`,
        store_id: order.store_id,
        store_name: store.name,
        sku: item.sku,
        sku_name: item.name,
        quantity: order.quantity,
        reason: order.reason,
      };
    } catch (error) {
      // Asking is not an outcome: round 2 (or the buyer's silence) writes the audit line.
      if (error instanceof AskBuyer) throw error;
      const toolError = toToolError(error, ctx.requestId);
      const detail = args.dry_run === true ? `dry_run: ${toolError.message}` : toolError.message;
      await audit(ctx, outcomeOf(toolError, stage), auditArgs, null, detail);
      throw toolError;
    }
  },
});
