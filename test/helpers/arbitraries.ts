import fc from "fast-check";
import { SEED_STOCK, SEED_STORES } from "../../src/storelink/seed.js";
import { TOOL_NAMES as DECLARED_TOOLS, type ToolName } from "../../src/tools/names.js";
import { HERO_REASON } from "./harness.js";

/** Run counts: enough to find shape bugs, small enough that the whole suite stays fast. */
export const RUNS = { numRuns: 60 } as const;

/**
 * Every tool's required argument names, as the spec defines them. Typed by the declared tool set,
 * so a tool added to src/tools/names.ts does not compile here until the property tests attack it.
 */
export const TOOL_FIELDS: { readonly [K in ToolName]: readonly string[] } = {
  lookup_sku: ["query"],
  get_stock_position: ["sku", "store_ids"],
  create_replenishment_order: ["store_id", "sku", "quantity", "reason"],
  get_replenishment_status: ["store_id", "order_id"],
};
export type { ToolName };
export const TOOL_NAMES: readonly ToolName[] = DECLARED_TOOLS;

const CONTROL = fc.integer({ min: 0, max: 0x1f }).map((c) => String.fromCharCode(c));

/** Strings a careless parser trips on: control chars, NUL, lone surrogates, RTL marks, huge. */
export const nastyString = fc.oneof(
  fc.string(),
  fc.string({ unit: "grapheme" }),
  fc.string({ unit: "binary" }),
  fc.array(CONTROL, { minLength: 1, maxLength: 20 }).map((cs) => cs.join("")),
  fc.constantFrom(
    "",
    " ",
    "\u0000",
    "\ud800",
    "\u202e47",
    "47\u0000",
    "../../etc/passwd",
    "$" + "{process.env}",
    "<script>alert(1)</script>",
    "'; DROP TABLE orders; --",
    "%s%s%n",
    "__proto__",
    "constructor",
    "toString",
    "hasOwnProperty",
  ),
  fc.integer({ min: 1_000, max: 300_000 }).map((n) => "x".repeat(n)),
);

/** Values of every JSON type and then some (for "wrong type" fields). */
export const anyValue: fc.Arbitrary<unknown> = fc.oneof(
  nastyString,
  fc.integer(),
  fc.double(),
  fc.constantFrom(Number.NaN, Number.POSITIVE_INFINITY, -0, 1e308, 2 ** 53 + 1, 0.5, -1, 0),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.oneof(fc.string(), fc.integer()), { maxLength: 5 }),
  fc.dictionary(fc.string(), fc.string(), { maxKeys: 3 }),
);

/**
 * Objects carrying prototype-pollution keys as OWN properties (built by JSON.parse, as a parser on
 * the wire would), so a merge or spread that honours `__proto__` would pollute Object.prototype.
 */
export const pollutionPayload = fc
  .constantFrom(
    '{"__proto__":{"polluted":"yes"}}',
    '{"constructor":{"prototype":{"polluted":"yes"}}}',
    '{"__proto__":{"isAdmin":true},"constructor":{"prototype":{"polluted":"yes"}}}',
    '{"prototype":{"polluted":"yes"}}',
  )
  .map((json) => JSON.parse(json) as Record<string, unknown>);

/** True if anything was added to Object.prototype (call after a run; names the keys). */
export function pollutedKeys(): string[] {
  const probe: Record<string, unknown> = {};
  return ["polluted", "isAdmin"].filter((k) => k in probe).concat(Object.keys(Object.prototype));
}

/**
 * Copies `extra` onto a copy of `base` as own properties. Object.assign or spread-then-assign
 * would run the `__proto__` setter instead, and the payload would never reach the server.
 */
export function withOwn(
  base: Record<string, unknown>,
  extra: Record<string, unknown>,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const source of [base, extra]) {
    for (const [k, v] of Object.entries(source)) {
      Object.defineProperty(out, k, {
        value: v,
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
  }
  return out;
}

/** Arguments for `tool`: real field names mixed with junk names, any values, pollution keys. */
export function arbitraryArgs(tool: ToolName): fc.Arbitrary<unknown> {
  const fields = TOOL_FIELDS[tool];
  const key = fc.oneof(
    fc.constantFrom(...fields),
    fc.constantFrom(...fields),
    fc.constantFrom(
      "__proto__",
      "constructor",
      "prototype",
      "extra",
      "store_ids",
      "idempotency_key",
    ),
    fc.string({ maxLength: 10 }),
  );
  const record = fc
    .array(fc.tuple(key, anyValue), { maxLength: 6 })
    // Object.fromEntries defines own properties, so "__proto__" stays an own key, as on the wire.
    .map((entries) => Object.fromEntries(entries));
  const polluted = fc.tuple(record, pollutionPayload).map(([r, p]) => withOwn(p, r) as unknown);
  return fc.oneof(
    { weight: 4, arbitrary: record },
    { weight: 1, arbitrary: polluted },
    { weight: 1, arbitrary: anyValue },
  );
}

/** A valid order for a store whose key the server holds. */
export const validOrder = (storeId = "47") => ({
  store_id: storeId,
  sku: "8847291",
  quantity: 24,
  reason: HERO_REASON,
});

/** A non-string that is still a valid id: a whole number is accepted as its decimal text. */
const numericId = (v: unknown, valid: readonly string[]): boolean =>
  typeof v === "number" && Number.isSafeInteger(v) && v >= 0 && valid.includes(String(v));

/** The wrong values for each order field, each one reason the order must be refused. */
const WRONG: Record<string, fc.Arbitrary<unknown>> = {
  store_id: fc.oneof(
    fc.constantFrom("", "   ", "999", "047", "4 7", "x".repeat(33), "47\u0000", "..", "4.7"),
    anyValue.filter(
      (v) =>
        typeof v !== "string" &&
        !numericId(
          v,
          SEED_STORES.map((s) => s.store_id),
        ),
    ),
  ),
  sku: fc.oneof(
    fc.constantFrom("", "   ", "0000000", "884729", "88472911", "6620174x", "x".repeat(33), "."),
    anyValue.filter((v) => typeof v !== "string" && !numericId(v, Object.keys(SEED_STOCK))),
  ),
  quantity: fc.oneof(
    fc.constantFrom(0, -1, 0.5, 24.000001, 10_001, 1e9, Number.NaN, "24", "twenty", null, true),
    fc.integer({ max: 0 }),
    fc.integer({ min: 10_001 }),
    fc.double().filter((d) => !Number.isInteger(d)),
  ),
  reason: fc.oneof(
    fc.constantFrom("", "   ", "n/a", "N/A.", "asap", "tbd", "test", "12345678901234", "ok"),
    fc.constantFrom("restock now", "see above", "short one", "x".repeat(1001)),
    anyValue.filter((v) => typeof v !== "string"),
  ),
};

/** Stores in the seed that do not stock a SKU: ordering it there must be refused. */
const NOT_RANGED = [
  { store_id: "111", sku: "6620174" },
  { store_id: "128", sku: "2205617" },
];

/** Near-valid orders: exactly one thing wrong (a bad field, an extra field, or not ranged). */
export const nearValidOrder: fc.Arbitrary<Record<string, unknown>> = fc.oneof(
  fc
    .tuple(
      fc.constantFrom(...Object.keys(WRONG)),
      fc.constantFrom(...SEED_STORES.map((s) => s.store_id)),
    )
    .chain(([field, store]) =>
      (WRONG[field] as fc.Arbitrary<unknown>).map((bad) => ({
        ...validOrder(store),
        [field]: bad,
      })),
    ),
  fc.constantFrom("store_id", "sku", "quantity", "reason").map((field) => {
    const order: Record<string, unknown> = validOrder();
    delete order[field];
    return order;
  }),
  fc
    // Not "__proto__": the SDK's request parsing drops that key before any tool sees it (tested
    // on its own in tool-arguments.test.ts).
    .tuple(fc.constantFrom("extra", "price", "supplier", "constructor", "prototype"), anyValue)
    .map(([k, v]) => withOwn(validOrder(), { [k]: v })),
  fc.constantFrom(...NOT_RANGED).map((r) => ({ ...validOrder(), ...r })),
);
