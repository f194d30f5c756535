import { describe, expect, it } from "vitest";
import { DurationHistogram } from "../../src/telemetry/durations.js";

/** The server's own duration histograms: the buckets, counts and series the SDK's would give. */

const histogram = () =>
  new DurationHistogram("d", "a duration", [0.01, 0.1, 1], ["route", "status"]);

describe("DurationHistogram", () => {
  it("counts each value in the first bucket whose upper bound holds it (bounds inclusive)", () => {
    const h = histogram();
    for (const v of [0, 0.01, 0.0100001, 0.1, 0.5, 1, 1.5, 30])
      h.record(v, h.valuesOf({ route: "r" }));
    const point = h.collect()?.dataPoints[0];
    expect(point?.value).toEqual({
      buckets: { boundaries: [0.01, 0.1, 1], counts: [2, 2, 2, 2] },
      sum: 0 + 0.01 + 0.0100001 + 0.1 + 0.5 + 1 + 1.5 + 30,
      count: 8,
      min: 0,
      max: 30,
    });
    expect(point?.attributes).toEqual({ route: "r" });
  });

  it("one series per set of values of its own attributes; others are ignored, 200 and '200' differ", () => {
    const h = histogram();
    h.record(0.2, h.valuesOf({ route: "a", status: 200, other: "x" }));
    h.record(0.2, h.valuesOf({ route: "a", status: 200, other: "y" }));
    h.record(0.2, h.valuesOf({ route: "a", status: "200" }));
    h.record(0.2, h.valuesOf({ route: "a" }));
    h.record(Number.NaN, h.valuesOf({ route: "a" }));
    h.record(-1, h.valuesOf({ route: "a" }));
    const points = h.collect()?.dataPoints ?? [];
    expect(points.map((p) => [p.attributes, p.value.count])).toEqual([
      [{ route: "a", status: 200 }, 2],
      [{ route: "a", status: "200" }, 1],
      [{ route: "a" }, 1],
    ]);
  });

  it("values kept later replace earlier ones; an undefined one or a foreign name changes nothing", () => {
    const h = histogram();
    const values = h.valuesOf({ route: "a", status: 200 });
    h.keep(values, { status: 500, other: 1 });
    h.keep(values, { status: undefined });
    h.keepOne(values, "route", "b");
    h.record(0.1, values);
    expect(h.collect()?.dataPoints.map((p) => p.attributes)).toEqual([{ route: "b", status: 500 }]);
  });

  it("a histogram with no attributes of its own keeps one series", () => {
    const h = new DurationHistogram("d", "a duration", [1], []);
    for (const route of ["a", "b", undefined]) h.record(0.5, h.valuesOf({ route }));
    const points = h.collect()?.dataPoints ?? [];
    expect(points.map((p) => [p.attributes, p.value.count])).toEqual([[{}, 3]]);
  });

  it("values that print alike stay apart: true and 'true', 1 and '1', absent and ''", () => {
    const h = histogram();
    for (const status of [true, "true", 1, "1", undefined, ""])
      h.record(0.5, h.valuesOf({ route: "r", status }));
    h.record(0.5, h.valuesOf({ route: "r", status: 1 }));
    const points = h.collect()?.dataPoints ?? [];
    expect(points.map((p) => [p.attributes.status, p.value.count])).toEqual([
      [true, 1],
      ["true", 1],
      [1, 2],
      ["1", 1],
      [undefined, 1],
      ["", 1],
    ]);
  });

  it("nothing to export before a first record; past the series limit, one overflow series", () => {
    const h = histogram();
    expect(h.collect()).toBeUndefined();
    for (let i = 0; i < 2100; i++) h.record(0.5, h.valuesOf({ route: `r${i}` }));
    const points = h.collect()?.dataPoints ?? [];
    expect(points).toHaveLength(2001);
    expect(points.find((p) => p.attributes["otel.metric.overflow"] === true)?.value.count).toBe(
      100,
    );
  });
});
