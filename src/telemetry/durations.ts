import { type HrTime, ValueType } from "@opentelemetry/api";
import { millisToHrTime } from "@opentelemetry/core";
import {
  AggregationTemporality,
  DataPointType,
  type HistogramMetricData,
} from "@opentelemetry/sdk-metrics";
import type { AttributeValue } from "./api.js";

/**
 * A duration histogram kept by this server rather than by the SDK's instrument: the SDK hashes a
 * measurement's attributes on every record (sorting and JSON-stringifying them), which was the
 * largest part of telemetry's own CPU per call. Here the attribute names are fixed per
 * histogram, so a measurement's series is found by its values joined in that order, and the
 * series are handed to the SDK's reader at each collection (a MetricProducer, telemetry/otel.ts),
 * which exports them as the instrument would have: explicit buckets (upper bound inclusive),
 * count, sum, min, max, cumulative since the start.
 */

/** Series kept per histogram; the rest are counted in one overflow series, as the SDK does. */
const SERIES_LIMIT = 2000;
const OVERFLOW = { "otel.metric.overflow": true } as const;

interface Series {
  readonly attributes: Record<string, AttributeValue>;
  readonly counts: number[];
  sum: number;
  count: number;
  min: number;
  max: number;
}

/** A measurement's attribute values, one place per attribute name of its histogram. */
export type MetricValues = (AttributeValue | undefined)[];

/** One level of the series tree: an attribute's values, each to the next level or a series. */
type Level = Map<AttributeValue | undefined, unknown>;

export class DurationHistogram {
  /**
   * The series, found through one level per fixed attribute name, keyed by its value (a Map key
   * keeps 200 and "200" apart): a record that finds its series allocates nothing.
   */
  readonly #tree: Level = new Map();
  readonly #series: Series[] = [];
  #overflow: Series | undefined;
  readonly #start: HrTime = millisToHrTime(Date.now());

  constructor(
    readonly name: string,
    readonly description: string,
    private readonly boundaries: readonly number[],
    readonly attributeNames: readonly string[],
  ) {
    this.#slots = new Map(attributeNames.map((name, slot) => [name, slot]));
  }

  /** Each attribute name's place in a measurement's values. */
  readonly #slots: ReadonlyMap<string, number>;

  /** A measurement's values: those of `attributes` this histogram keeps, in their places. */
  valuesOf(attributes: Readonly<Record<string, AttributeValue | undefined>>): MetricValues {
    const values = new Array<AttributeValue | undefined>(this.attributeNames.length).fill(
      undefined,
    );
    this.keep(values, attributes);
    return values;
  }

  /** Sets in `values` those of `attributes` this histogram keeps (undefined ones are skipped). */
  keep(values: MetricValues, attributes: Readonly<Record<string, AttributeValue | undefined>>) {
    for (const name in attributes) this.keepOne(values, name, attributes[name]);
  }

  keepOne(values: MetricValues, name: string, value: AttributeValue | undefined): void {
    if (value === undefined) return;
    const slot = this.#slots.get(name);
    if (slot !== undefined) values[slot] = value;
  }

  /** One duration in seconds, with its attributes' values (`valuesOf`). */
  record(seconds: number, values: MetricValues): void {
    if (!(seconds >= 0)) return;
    const series = this.#seriesOf(values);
    let bucket = 0;
    while (bucket < this.boundaries.length && seconds > (this.boundaries[bucket] as number)) {
      bucket++;
    }
    series.counts[bucket] = (series.counts[bucket] as number) + 1;
    series.sum += seconds;
    series.count++;
    if (seconds < series.min) series.min = seconds;
    if (seconds > series.max) series.max = seconds;
  }

  #seriesOf(values: MetricValues): Series {
    // With no names of its own, the one series hangs off the root under `undefined`.
    const leaf = Math.max(values.length - 1, 0);
    let level = this.#tree;
    for (let i = 0; i < leaf; i++) {
      let next = level.get(values[i]) as Level | undefined;
      if (next === undefined) {
        if (this.#series.length >= SERIES_LIMIT) return this.#overflowSeries();
        next = new Map();
        level.set(values[i], next);
      }
      level = next;
    }
    const found = level.get(values[leaf]) as Series | undefined;
    if (found !== undefined) return found;
    if (this.#series.length >= SERIES_LIMIT) return this.#overflowSeries();
    const kept: Record<string, AttributeValue> = {};
    this.attributeNames.forEach((name, i) => {
      const value = values[i];
      if (value !== undefined) kept[name] = value;
    });
    const series = this.#add(kept);
    level.set(values[leaf], series);
    return series;
  }

  #overflowSeries(): Series {
    this.#overflow ??= this.#add({ ...OVERFLOW });
    return this.#overflow;
  }

  #add(attributes: Record<string, AttributeValue>): Series {
    const series: Series = {
      attributes,
      counts: new Array<number>(this.boundaries.length + 1).fill(0),
      sum: 0,
      count: 0,
      min: Number.POSITIVE_INFINITY,
      max: Number.NEGATIVE_INFINITY,
    };
    this.#series.push(series);
    return series;
  }

  /** The histogram as the SDK's reader exports it, now; undefined before its first record. */
  collect(): HistogramMetricData | undefined {
    if (this.#series.length === 0) return undefined;
    const end = millisToHrTime(Date.now());
    return {
      descriptor: {
        name: this.name,
        description: this.description,
        unit: "s",
        valueType: ValueType.DOUBLE,
      },
      aggregationTemporality: AggregationTemporality.CUMULATIVE,
      dataPointType: DataPointType.HISTOGRAM,
      dataPoints: this.#series.map((s) => ({
        startTime: this.#start,
        endTime: end,
        attributes: { ...s.attributes },
        value: {
          buckets: { boundaries: [...this.boundaries], counts: [...s.counts] },
          sum: s.sum,
          count: s.count,
          min: s.min,
          max: s.max,
        },
      })),
    };
  }
}
