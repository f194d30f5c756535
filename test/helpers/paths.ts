import { HERO_REASON } from "./harness.js";

/**
 * One call down every path the server has today: each success and each documented failure.
 * Suites that must cover "every path" (the secrets canary, interop checks) drive this list;
 * extend it when a path is added.
 */
export const EVERY_PATH: readonly { name: string; arguments: Record<string, unknown> }[] = [
  { name: "lookup_sku", arguments: { query: "butter" } },
  { name: "lookup_sku", arguments: { query: "no such product" } },
  { name: "lookup_sku", arguments: { query: "" } },
  {
    name: "get_stock_position",
    arguments: { sku: "8847291", store_ids: ["47", "63", "102", "111", "128", "999"] },
  },
  { name: "get_stock_position", arguments: { sku: "6620174", store_ids: ["111", "47"] } },
  { name: "get_stock_position", arguments: { sku: "0000000", store_ids: ["47"] } },
  { name: "get_stock_position", arguments: { sku: "8847291", store_ids: ["63", "128"] } },
  {
    name: "create_replenishment_order",
    arguments: { store_id: "47", sku: "8847291", quantity: 24, reason: HERO_REASON },
  },
  {
    name: "create_replenishment_order",
    arguments: { store_id: "63", sku: "8847291", quantity: 5, reason: HERO_REASON },
  },
  {
    name: "create_replenishment_order",
    arguments: { store_id: "128", sku: "8847291", quantity: 5, reason: HERO_REASON },
  },
  {
    name: "create_replenishment_order",
    arguments: { store_id: "111", sku: "6620174", quantity: 5, reason: HERO_REASON },
  },
  {
    name: "create_replenishment_order",
    arguments: { store_id: "47", sku: "8847291", quantity: 0, reason: "n/a" },
  },
  {
    name: "create_replenishment_order",
    arguments: { store_id: "999", sku: "8847291", quantity: 5, reason: HERO_REASON },
  },
  { name: "get_replenishment_status", arguments: { store_id: "47", order_id: "RPL-47-001" } },
  { name: "get_replenishment_status", arguments: { store_id: "102", order_id: "RPL-47-001" } },
  { name: "get_replenishment_status", arguments: { store_id: "63", order_id: "RPL-63-001" } },
  { name: "no_such_tool", arguments: {} },
];
