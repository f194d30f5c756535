import { createReplenishmentOrder } from "./create-replenishment-order/index.js";
import type { Tool } from "./define.js";
import { getReplenishmentStatus } from "./get-replenishment-status.js";
import { getStockPosition } from "./get-stock-position.js";
import { lookupSku } from "./lookup-sku.js";
import { TOOL_NAMES } from "./names.js";

const DEFINED: readonly Tool[] = [
  lookupSku,
  getStockPosition,
  createReplenishmentOrder,
  getReplenishmentStatus,
];

/** Every tool, in TOOL_NAMES's order; a name without its tool (or a tool without a name) fails at load. */
export const TOOLS: readonly Tool[] = TOOL_NAMES.map((name) => {
  const tool = DEFINED.find((t) => t.name === name);
  if (!tool) throw new Error(`tools/index.ts: ${name} is in TOOL_NAMES but not defined`);
  return tool;
});
if (DEFINED.length !== TOOL_NAMES.length) {
  throw new Error("tools/index.ts: a defined tool is missing from TOOL_NAMES");
}
