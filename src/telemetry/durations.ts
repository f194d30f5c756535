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

export class DurationHistogram {
  readonly #series = new Map<string, Series>();
  readonly #start: HrTime = millisToHrTime(Date.now());

  constructor(
    readonly name: string,
    readonly description: string,
    private readonly boundaries: readonly number[],
    private readonly attributeNames: readonly string[],
  ) {}

  /** One duration in seconds, with the attributes of its span (only the fixed names are kept). */
  record(seconds: number, attributes: Readonly<Record<string, AttributeValue | undefined>>): void {
    if (!(seconds >= 0)) return;
    let key = "";
    for (const name of this.attributeNames) {
      const value = attributes[name];
      // A type tag keeps 200 and "200" apart; \u0000 cannot end a tag.
      key += value === undefined ? "\u0000" : `${typeof value}:${String(value)}\u0000`;
    }
    let series = this.#series.get(key);
    if (series === undefined) {
      series = this.#newSeries(key, attributes);
    }
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

  #newSeries(key: string, attributes: Readonly<Record<string, AttributeValue | undefined>>) {
    const overflowing = this.#series.size >= SERIES_LIMIT;
    const found = overflowing ? this.#series.get("overflow") : undefined;
    if (found) return found;
    const kept: Record<string, AttributeValue> = {};
    if (overflowing) Object.assign(kept, OVERFLOW);
    else {
      for (const name of this.attributeNames) {
        const value = attributes[name];
        if (value !== undefined) kept[name] = value;
      }
    }
    const series: Series = {
      attributes: kept,
      counts: new Array<number>(this.boundaries.length + 1).fill(0),
      sum: 0,
      count: 0,
      min: Number.POSITIVE_INFINITY,
      max: Number.NEGATIVE_INFINITY,
    };
    this.#series.set(overflowing ? "overflow" : key, series);
    return series;
  }

  /** The histogram as the SDK's reader exports it, now; undefined before its first record. */
  collect(): HistogramMetricData | undefined {
    if (this.#series.size === 0) return undefined;
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
      dataPoints: [...this.#series.values()].map((s) => ({
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
