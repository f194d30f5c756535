import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { contractTime } from "../../src/storelink/contract.js";

/**
 * contractTime answers a time already in the form this server writes without making a Date: the
 * answer must be the one the Date round trip gives, for every string of that shape.
 */
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:\d{2})$/;
function throughDate(value: string): string | undefined {
  if (!DATE_TIME.test(value)) return undefined;
  const at = new Date(value);
  return Number.isNaN(at.getTime()) ? undefined : at.toISOString();
}

const digits = (count: number) =>
  fc
    .array(fc.constantFrom(..."0123456789"), { minLength: count, maxLength: count })
    .map((d) => d.join(""));
/** The written form's shape with any digits: months 00-99, day 31 of April, 24:00, second 60. */
const shaped = fc
  .tuple(digits(4), digits(2), digits(2), digits(2), digits(2), digits(2), digits(3))
  .map(([y, mo, d, h, mi, s, ms]) => `${y}-${mo}-${d}T${h}:${mi}:${s}.${ms}Z`);
/** Plausible ranges, where the calendar's edges are. */
const near = fc
  .tuple(
    fc.integer({ min: 1896, max: 2404 }),
    fc.integer({ min: 0, max: 13 }),
    fc.integer({ min: 0, max: 32 }),
    fc.integer({ min: 0, max: 24 }),
    fc.integer({ min: 0, max: 60 }),
    fc.integer({ min: 0, max: 60 }),
    fc.integer({ min: 0, max: 999 }),
  )
  .map(([y, mo, d, h, mi, s, ms]) => {
    const p = (v: number, w = 2) => String(v).padStart(w, "0");
    return `${p(y, 4)}-${p(mo)}-${p(d)}T${p(h)}:${p(mi)}:${p(s)}.${p(ms, 3)}Z`;
  });

describe("contractTime", () => {
  it("answers every string of the written shape as the Date round trip does", () => {
    fc.assert(
      fc.property(fc.oneof(shaped, near), (value) => {
        expect(contractTime(value)).toBe(throughDate(value));
      }),
      { numRuns: 20_000 },
    );
  });

  it("answers any other string as the Date round trip does", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string(),
          fc.date({ noInvalidDate: true }).map((d) => d.toISOString()),
          near.map((v) => v.replace(".", ",")),
          near.map((v) => `${v.slice(0, 19)}+02:00`),
          near.map((v) => `${v.slice(0, 20)}123456Z`),
        ),
        (value) => {
          expect(contractTime(value)).toBe(throughDate(value));
        },
      ),
      { numRuns: 5_000 },
    );
  });

  it("the calendar's edges, named", () => {
    expect(contractTime("2024-02-29T23:59:59.999Z")).toBe("2024-02-29T23:59:59.999Z");
    expect(contractTime("2026-02-29T00:00:00.000Z")).toBe(throughDate("2026-02-29T00:00:00.000Z"));
    expect(contractTime("2100-02-29T00:00:00.000Z")).toBe(throughDate("2100-02-29T00:00:00.000Z"));
    expect(contractTime("2026-04-31T00:00:00.000Z")).toBe(throughDate("2026-04-31T00:00:00.000Z"));
    expect(contractTime("2026-12-04T24:00:00.000Z")).toBe(throughDate("2026-12-04T24:00:00.000Z"));
    expect(contractTime("2026-12-04T12:00:60.000Z")).toBe(throughDate("2026-12-04T12:00:60.000Z"));
    expect(contractTime(20261204)).toBeUndefined();
  });
});
