/**
 * What a durable audit line costs compared with a plain trace line.
 *
 *   npm run bench:audit              (writes under the OS temp dir; BENCH_DIR=... to pick a disk)
 *
 * Sequential: one call at a time, as a single agent session runs. Concurrent: N writes in
 * flight at once, where group commit lets one fdatasync cover a whole batch.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { formatAuditLine, formatTraceLine } from "../src/logging/format.js";
import { LineFile } from "../src/logging/line-file.js";
import { callFields } from "../test/helpers/records.js";

const N = Number(process.env.BENCH_N ?? 2000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 32);

const traceLine = formatTraceLine({
  ts: new Date().toISOString(),
  ...callFields("req_9b0ab68b0000000000000000000000"),
  tool: "get_stock_position",
  store_id: null,
  status: "ok",
  error: null,
  duration_ms: 1.23,
  args: { sku: "8847291", store_ids: ["47", "102", "111"] },
});
const auditLine = formatAuditLine({
  ts: new Date().toISOString(),
  outcome: "CREATED",
  order_id: "RPL-47-001",
  store_id: "47",
  sku: "8847291",
  quantity: 24,
  ...callFields("req_9b0ab68b0000000000000000000000"),
  reason: "Gap of 8 units at store 47 over 24h: on_hand 3 vs 11 sold. Buyer approved 24.",
});

const warn = (message: string): void => {
  throw new Error(message);
};

async function sequential(file: LineFile, line: string, durable: boolean): Promise<number> {
  const start = process.hrtime.bigint();
  for (let i = 0; i < N; i++) await file.append(line, { durable });
  return Number(process.hrtime.bigint() - start) / 1e3 / N;
}

async function concurrent(file: LineFile, line: string, durable: boolean): Promise<number> {
  const start = process.hrtime.bigint();
  for (let i = 0; i < N; i += CONCURRENCY) {
    await Promise.all(
      Array.from({ length: Math.min(CONCURRENCY, N - i) }, () => file.append(line, { durable })),
    );
  }
  return Number(process.hrtime.bigint() - start) / 1e3 / N;
}

async function main(): Promise<void> {
  const dir = await mkdtemp(join(process.env.BENCH_DIR ?? tmpdir(), "korral-bench-"));
  const rows: [string, number][] = [];
  try {
    const run = async (name: string, fn: (f: LineFile) => Promise<number>) => {
      const file = new LineFile(join(dir, `${name.replaceAll(/\W+/g, "_")}.log`), warn);
      await fn(file); // warm-up: open, allocate, JIT
      rows.push([name, await fn(file)]);
      await file.close();
    };
    await run("trace line, sequential (no sync)", (f) => sequential(f, traceLine, false));
    await run("audit line, sequential (fdatasync)", (f) => sequential(f, auditLine, true));
    await run(`trace line, ${CONCURRENCY} in flight`, (f) => concurrent(f, traceLine, false));
    await run(`audit line, ${CONCURRENCY} in flight`, (f) => concurrent(f, auditLine, true));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  process.stderr.write(`${N} lines each, dir ${dir}\n`);
  for (const [name, us] of rows) {
    process.stderr.write(`${name.padEnd(40)} ${us.toFixed(1).padStart(8)} µs/line\n`);
  }
}

void main();
