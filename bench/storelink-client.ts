import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { ApiKey } from "../src/keys/api-key.js";
import { HttpStoreLinkClient } from "../src/storelink/http.js";
import { SEED_ACCEPTED_KEYS } from "../src/storelink/seed.js";

/**
 * getStock through HttpStoreLinkClient against the built emulator in its own process: calls per
 * second, latency percentiles, and TCP connections the emulator accepted (keep-alive proof: it
 * should be about the concurrency, not the call count). Run: npm run bench:storelink
 */

const CALLS = Number(process.env.BENCH_CALLS ?? 20_000);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 1_000);
const CONCURRENCIES = (process.env.BENCH_CONCURRENCY ?? "1,10,50").split(",").map(Number);
const out = (line: string): void => {
  process.stdout.write(`${line}\n`);
};

const emulator = spawn(
  process.execPath,
  [fileURLToPath(new URL("../dist/storelink-emulator.js", import.meta.url))],
  { env: { PATH: process.env.PATH ?? "", PORT: "0" }, stdio: ["ignore", "ignore", "pipe"] },
);
let stderr = "";
emulator.stderr.setEncoding("utf8");
emulator.stderr.on("data", (chunk: string) => {
  stderr += chunk;
});
const waitFor = async (pattern: RegExp, from: number): Promise<RegExpExecArray> => {
  for (let i = 0; i < 400; i += 1) {
    const match = pattern.exec(stderr.slice(from));
    if (match) return match;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`emulator did not report ${pattern}: ${stderr}`);
};
/** The emulator prints its accepted-connection count on SIGUSR2. */
const connections = async (): Promise<number> => {
  const from = stderr.length;
  emulator.kill("SIGUSR2");
  return Number((await waitFor(/connections=(\d+)/, from))[1]);
};

const url = (await waitFor(/listening on (http:\/\/\S+)/, 0))[1] as string;
const key = new ApiKey(SEED_ACCEPTED_KEYS["47"] as string);
const percentile = (sorted: number[], p: number): number =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;

out(`StoreLink HTTP client bench: getStock x ${CALLS} per run, Node ${process.version}`);
out("| concurrency | calls/s | p50 ms | p95 ms | p99 ms | max ms | calls | sockets opened |");
out("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");

/** `calls` getStock calls over `concurrency` workers; returns sorted latencies and wall time. */
async function run(
  client: HttpStoreLinkClient,
  concurrency: number,
  calls: number,
): Promise<{ latencies: number[]; seconds: number }> {
  const latencies: number[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < calls) {
        next += 1;
        const t = performance.now();
        await client.getStock("47", "8847291", key);
        latencies.push(performance.now() - t);
      }
    }),
  );
  latencies.sort((x, y) => x - y);
  return { latencies, seconds: (performance.now() - started) / 1000 };
}

for (const concurrency of CONCURRENCIES) {
  // global fetch's pool is process-wide, so sockets are counted as a delta per level.
  const client = new HttpStoreLinkClient({ baseUrl: url, timeoutMs: 5_000 });
  const before = await connections();
  await run(client, concurrency, WARMUP);
  const { latencies, seconds } = await run(client, concurrency, CALLS);
  const opened = (await connections()) - before;
  const f = (n: number): string => n.toFixed(2);
  out(
    `| ${concurrency} | ${Math.round(CALLS / seconds)} | ${f(percentile(latencies, 50))} | ${f(
      percentile(latencies, 95),
    )} | ${f(percentile(latencies, 99))} | ${f(latencies.at(-1) ?? 0)} | ${CALLS + WARMUP} | ${opened} |`,
  );
}
out(`total sockets accepted by the emulator: ${await connections()}`);
emulator.kill("SIGTERM");
