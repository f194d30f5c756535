import { createReplenishmentOrder } from "./create-replenishment-order/index.js";
import type { Tool } from "./define.js";
import { getReplenishmentStatus } from "./get-replenishment-status.js";
import { getStockPosition } from "./get-stock-position.js";
import { lookupSku } from "./lookup-sku.js";

/** Every tool, in the order the agent is expected to use them. */
export const TOOLS: readonly Tool[] = [
  lookupSku,
  getStockPosition,
  createReplenishmentOrder,
  getReplenishmentStatus,
];
