import { inputRequired, inputResponse } from "@modelcontextprotocol/server";
import { ToolError } from "../../errors.js";
import type { CallRecord } from "../../logging/call-record.js";
import {
  newNonce,
  nonceIdempotencyKey,
  orderDigest,
  REQUEST_STATE_TTL_SECONDS,
} from "../../policy/request-state.js";
import type { Sku, StockReading, Store } from "../../storelink/client.js";
import { AskBuyer, type Rounds, type ToolContext } from "../define.js";
import { amount, describeStock, readStockUnderCap } from "./preview.js";
import type { OrderInput } from "./schema.js";

/**
 * Asking the buyer: what the dialog says, and how an answer counts, through input_required
 * rounds and signed state in both protocol eras (a 2025 stdio client is asked the same question
 * by the SDK's legacy shim, as elicitation/create). Anything but an explicit yes sends nothing.
 */

/**
 * Whom a confirmation state is bound to: the caller and, when its token names one, the client,
 * so neither another principal nor another client of the same one can answer it.
 */
const boundTo = (call: CallRecord): string =>
  call.client === undefined ? call.caller : `${call.caller} client=${call.client}`;

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
  args: Pick<OrderInput, "quantity" | "reason">,
  store: Store,
  item: Sku,
  stock: StockReading,
  by: string,
): string {
  const quantity = `${args.quantity}${item.unit === "kg" ? " kg" : ""}`;
  return [
    `Confirm this replenishment order, placed as ${by}. It loads a truck and cannot be cancelled here.`,
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

/**
 * Round 1 of a write: every check has passed (the cap, and the live read proves the key and the
 * ranging); answer `input_required` with the true order and signed state. `unanswered` is how
 * the write is audited should the buyer never answer.
 */
export async function askBuyer(
  args: OrderInput,
  ctx: ToolContext,
  rounds: Rounds,
  store: Store,
  item: Sku,
  unanswered: (error: ToolError) => Promise<unknown>,
): Promise<never> {
  const stock = await readStockUnderCap(args, ctx, store, item);
  const requestState = await rounds.signer.mint(
    { nonce: newNonce(), args: orderDigest(args) },
    boundTo(ctx.call),
  );
  throw new AskBuyer(
    inputRequired({
      inputRequests: {
        confirm: inputRequired.elicit({
          mode: "form",
          message: confirmationMessage(args, store, item, stock, ctx.call.by),
          requestedSchema: CONFIRM_SCHEMA,
        }),
      },
      requestState,
    }),
    async () => {
      const error = notConfirmed("no answer");
      await unanswered(error);
      return error;
    },
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
export async function confirmedByState(
  args: OrderInput,
  ctx: ToolContext,
  rounds: Rounds,
): Promise<string> {
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
  if (!rounds.signer.isCaller(state, boundTo(ctx.call))) {
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

export function confirmationRequired(): ToolError {
  return new ToolError(
    "not_confirmed",
    "This server requires the buyer to confirm every order, and the buyer cannot be asked " +
      "through this request (an MCP 2025-06-18 client over HTTP never can be, whatever it " +
      "declares; any other client must declare form elicitation); nothing was submitted.",
    "Tell the buyer to place the order from a client that can show a confirmation dialog: an " +
      "MCP 2026-07-28 client with form elicitation, or Claude Desktop over stdio.",
    false,
  );
}
