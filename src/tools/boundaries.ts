import { CALL_SEQUENCE } from "./names.js";

/** Shared wording for the model, so every description states the same boundaries. */

export const CALL_ORDER = `Call order: ${CALL_SEQUENCE}.`;

export const NOT_SUPPORTED =
  "Not supported by this server: supplier or vendor data, lead times, POS or transaction detail, " +
  "pricing, cost or margin, history or trends, forecasts, delivery ETAs, listing or searching " +
  "orders, and cancelling or amending orders (for those the buyer must contact Korral ops).";

export const GAP_SEMANTICS =
  "gap = units_sold_last_24h - on_hand. gap > 0: the store sold more in 24h than it has on the " +
  "shelf (the replenishment signal). gap = 0: knife edge, NOT fine: the shelf holds one more day " +
  "at yesterday's rate and empties in about 24h; report it as a watch item. gap < 0: stock exceeds " +
  "the last 24h of sales; no shortfall indicated. It is a 24-hour arithmetic signal, not a " +
  "forecast and not an order quantity.";
