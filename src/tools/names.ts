/**
 * Every tool, once, in the order the agent is expected to call them: the one declaration of how
 * many tools there are and of the call order. The tool list, the call-order sentence of every
 * description and the server's instructions are built from it, and `npm run texts` writes
 * manifest.json's tools and the docs' tool tables from the tools in this order;
 * test/meta/tool-names.test.ts holds the prompt to it.
 */
export const TOOL_NAMES = [
  "lookup_sku",
  "get_stock_position",
  "create_replenishment_order",
  "get_replenishment_status",
] as const;

export type ToolName = (typeof TOOL_NAMES)[number];

const NUMBER_WORDS = ["no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"];

/** "four tools" (the count in words, for sentences the model reads). */
export const TOOL_COUNT = `${NUMBER_WORDS[TOOL_NAMES.length] ?? TOOL_NAMES.length} tools`;

/** `lookup_sku -> get_stock_position -> ...` */
export const CALL_SEQUENCE = TOOL_NAMES.join(" -> ");
