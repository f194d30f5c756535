import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ApiKey } from "../../src/keys/api-key.js";

/**
 * ApiKey.scrub against an echo built as an attacker would: any sendable key, wrapped in random
 * bytes at any offset, encoded in any of the forms, in any case, inside other text. What is left
 * holds no run of the encoding that carries the key's bytes; ordinary text is left alone.
 */

const sendableKey = fc.string({
  unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)),
  minLength: 12,
  maxLength: 60,
});
const bytes = (n: number) => fc.uint8Array({ minLength: n, maxLength: n });

type Form = (blob: Buffer, key: Buffer) => { echo: string; core: string };
const FORMS: Record<string, Form> = {
  raw: (_b, key) => ({ echo: key.toString("latin1"), core: key.toString("latin1") }),
  hex: (b, key) => ({ echo: b.toString("hex"), core: key.toString("hex") }),
  percent: (b, key) => ({
    echo: b.toString("hex").replace(/../g, "%$&"),
    core: key.toString("hex").replace(/../g, "%$&"),
  }),
  base64: (b) => ({ echo: b.toString("base64"), core: "" }),
  base64url: (b) => ({ echo: b.toString("base64url"), core: "" }),
};

/** The characters of base64(prefix, key, ...) made of the key's bits alone. */
function coreOf(blob: Buffer, offset: number, keyLength: number, encoding: "base64" | "base64url") {
  const first = Math.ceil((8 * offset) / 6);
  const end = Math.floor((8 * (offset + keyLength)) / 6);
  return blob.toString(encoding).slice(first, end);
}

describe("ApiKey.scrub", () => {
  it("takes out the key in every form, at every alignment, in any case", () => {
    fc.assert(
      fc.property(
        sendableKey,
        fc.integer({ min: 0, max: 5 }),
        bytes(3),
        fc.constantFrom(...Object.keys(FORMS)),
        fc.constantFrom("as is", "upper", "lower"),
        (value, offset, tail, formName, kase) => {
          const key = Buffer.from(value);
          const blob = Buffer.concat([Buffer.from("xyzzy!").subarray(0, offset), key, tail]);
          const form = FORMS[formName] as Form;
          let { echo, core } = form(blob, key);
          if (formName === "base64" || formName === "base64url") {
            core = coreOf(blob, offset, key.length, formName);
          }
          const change = (t: string) =>
            kase === "upper" ? t.toUpperCase() : kase === "lower" ? t.toLowerCase() : t;
          const text = `order note: ${change(echo)} end`;
          const scrubbed = new ApiKey(value).scrub(text);
          expect(scrubbed.toLowerCase()).not.toContain(core.toLowerCase());
          expect(scrubbed).toContain("[REDACTED]");
        },
      ),
      { numRuns: 200 },
    );
  });

  it("leaves ordinary text and other keys alone", () => {
    const key = new ApiKey("slk_47_demo_7f3a91c2e5b8");
    const text =
      "Gap of 8 units at store 47 over 24h: on_hand 3 vs 11 sold. slk_63_demo_2b6d04e9a1f7";
    expect(key.scrub(text)).toBe(text);
    expect(key.scrub({ a: [text, 3] })).toEqual({ a: [text, 3] });
  });
});

/**
 * The walk through an answer: every string at any depth in arrays and plain objects scrubbed as a
 * string alone would be, keys and other values kept, an own `__proto__` kept as data, and the
 * very same value handed back when it holds no copy (nothing rebuilt).
 */
describe("ApiKey.scrub through JSON values", () => {
  const value = "slk_47_demo_7f3a91c2e5b8";
  const key = new ApiKey(value);
  const echoed = fc.oneof(
    fc.string({ maxLength: 40 }),
    fc.string({ maxLength: 8 }).map((s) => `${s}${value}${s}`),
  );
  const json = fc.letrec((tie) => ({
    node: fc.oneof(
      { depthSize: "small" },
      echoed,
      fc.integer(),
      fc.boolean(),
      fc.constant(null),
      fc.array(tie("node"), { maxLength: 4 }),
      fc.dictionary(fc.constantFrom("a", "b", "__proto__", "constructor", value), tie("node"), {
        maxKeys: 4,
      }),
    ),
  })).node;
  /** The reference: every string replaced as it is alone, through JSON's own reviver. */
  const reference = (v: unknown): unknown =>
    JSON.parse(JSON.stringify(v), (_k, x: unknown) => (typeof x === "string" ? key.scrub(x) : x));

  it("scrubs every string, keeps the rest, and rebuilds nothing that holds no copy", () => {
    fc.assert(
      fc.property(json, (raw) => {
        const v = JSON.parse(JSON.stringify(raw)) as unknown;
        const scrubbed = key.scrub(v);
        expect(JSON.stringify(scrubbed)).toBe(JSON.stringify(reference(v)));
        if (!JSON.stringify(v).includes(value)) expect(scrubbed).toBe(v);
      }),
      { numRuns: 300 },
    );
  });

  it("keeps an own __proto__ as data, never as the prototype", () => {
    const v = JSON.parse(`{"__proto__": {"x": "${value}"}, "y": ["${value}"]}`) as object;
    const scrubbed = key.scrub(v) as Record<string, unknown>;
    expect(Object.getPrototypeOf(scrubbed)).toBe(Object.prototype);
    expect(Object.hasOwn(scrubbed, "__proto__")).toBe(true);
    expect(JSON.stringify(scrubbed)).toBe('{"__proto__":{"x":"[REDACTED]"},"y":["[REDACTED]"]}');
  });

  it("walks own properties only: a polluted Object.prototype adds nothing to the answer", () => {
    const v = { a: "no key here", b: [value] };
    const clean = { a: "no key here" };
    let scrubbed: object;
    let cleanScrubbed: object;
    Object.defineProperty(Object.prototype, "polluted", {
      value: `${value} inherited`,
      enumerable: true,
      configurable: true,
      writable: true,
    });
    try {
      scrubbed = key.scrub(v);
      cleanScrubbed = key.scrub(clean);
    } finally {
      delete (Object.prototype as Record<string, unknown>).polluted;
    }
    expect(Object.keys(scrubbed)).toEqual(["a", "b"]);
    expect(JSON.stringify(scrubbed)).toBe('{"a":"no key here","b":["[REDACTED]"]}');
    // Nothing to scrub in its own properties: the same object back, not a copy.
    expect(cleanScrubbed).toBe(clean);
  });
});
