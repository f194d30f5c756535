/**
 * `npm run bench:limits`: what the shared limits store costs a call. The built HTTP service runs
 * twice, per instance and on a Redis on loopback (`redis-server`, started here), and each serves
 * the same sequence of calls one at a time: a read (`lookup_sku`, which takes the rate limit) and
 * a write (`create_replenishment_order`, which takes and settles a slot under the cap, and the
 * rate limit). Prints the median and p99 of each, and the difference. Expects `npm run build`.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { SEED_ACCEPTED_KEYS, SEED_SKUS } from "../src/storelink/seed.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const CALLS = process.argv.includes("--quick") ? 200 : 1_000;
const PASSWORD = "bench-password-0123456789";
const tmp = mkdtempSync(join(tmpdir(), "korral-bench-limits-"));
const keysFile = join(tmp, "keys.json");
writeFileSync(keysFile, JSON.stringify(SEED_ACCEPTED_KEYS));

async function freePort(): Promise<number> {
  const server = createServer().listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as { port: number };
  server.close();
  return port;
}

async function waitFor(child: ChildProcess, text: RegExp): Promise<string> {
  let seen = "";
  return new Promise((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      seen += chunk.toString();
      const match = text.exec(seen);
      if (match) resolve(match[1] ?? match[0]);
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);
    child.once("exit", () => reject(new Error(`exited before ${text}: ${seen}`)));
  });
}

async function startService(
  env: Record<string, string>,
): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, ["dist/http.js"], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? "",
      PORT: "0",
      HOST: "127.0.0.1",
      KORRAL_KEYS_FILE: keysFile,
      KORRAL_LOG_DIR: join(tmp, `log-${Math.random()}`),
      KORRAL_ORDER_CAP_PER_HOUR: "1000",
      KORRAL_RATE_LIMIT_PER_MIN: "1000000",
      KORRAL_DEDUPE_WINDOW_MIN: "0",
      ...env,
    },
    stdio: ["ignore", "ignore", "pipe"],
  });
  const port = await waitFor(child, /"port":(\d+)[^\n]*listening on HTTP/);
  return { url: `http://127.0.0.1:${port}/mcp`, child };
}

let id = 0;
async function timed(url: string, name: string, args: Record<string, unknown>): Promise<number> {
  const started = process.hrtime.bigint();
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: ++id,
      method: "tools/call",
      params: { name, arguments: args },
    }),
  });
  const body = (await res.json()) as {
    result?: { isError?: boolean; structuredContent?: unknown };
  };
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  if (!body.result || body.result.isError)
    throw new Error(`${name} failed: ${JSON.stringify(body)}`);
  return ms;
}

const quantile = (sorted: number[], q: number): number =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number;
const summary = (samples: number[]) => {
  const sorted = [...samples].sort((a, b) => a - b);
  return { p50: quantile(sorted, 0.5), p99: quantile(sorted, 0.99) };
};

async function main(): Promise<void> {
  const redisPort = await freePort();
  const redis = spawn(
    "redis-server",
    [
      "--bind",
      "127.0.0.1",
      "--port",
      String(redisPort),
      "--save",
      "",
      "--appendonly",
      "no",
      "--requirepass",
      PASSWORD,
    ],
    { stdio: "ignore" },
  );
  const services = {
    "per-instance": await startService({}),
    "shared (redis)": await startService({
      KORRAL_REDIS_URL: `redis://:${PASSWORD}@127.0.0.1:${redisPort}`,
    }),
  };
  const samples: Record<string, { read: number[]; write: number[] }> = {};
  try {
    const stores = ["47", "102", "111"];
    for (const [label, { url }] of Object.entries(services)) {
      samples[label] = { read: [], write: [] };
      // Warm-up: connections, the pool of MCP servers, the script cache.
      for (let i = 0; i < 50; i++) await timed(url, "lookup_sku", { query: "butter" });
    }
    for (let i = 0; i < CALLS; i++) {
      // Each write in its own bucket of the hour's 1000 slots: never at the cap.
      const write = {
        store_id: stores[i % stores.length],
        sku: (SEED_SKUS[i % 3] as { sku: string }).sku,
        quantity: 1 + i,
        reason: "Benchmark order: gap of 8 units at the store over 24h, buyer approved.",
      };
      for (const [label, { url }] of Object.entries(services)) {
        const s = samples[label] as { read: number[]; write: number[] };
        s.read.push(await timed(url, "lookup_sku", { query: "butter" }));
        s.write.push(await timed(url, "create_replenishment_order", write));
      }
    }
  } finally {
    for (const { child } of Object.values(services)) child.kill("SIGTERM");
    redis.kill("SIGKILL");
    rmSync(tmp, { recursive: true, force: true });
  }
  const base = samples["per-instance"] as { read: number[]; write: number[] };
  const shared = samples["shared (redis)"] as { read: number[]; write: number[] };
  const f = (n: number) => n.toFixed(2);
  const lines = [
    `${CALLS} sequential calls each, alternated; milliseconds per call`,
    "| call | per-instance p50 / p99 | shared (redis) p50 / p99 | added p50 / p99 |",
    "| --- | --- | --- | --- |",
    ...(["read", "write"] as const).map((kind) => {
      const a = summary(base[kind]);
      const b = summary(shared[kind]);
      const name = kind === "read" ? "read (lookup_sku)" : "write (create_replenishment_order)";
      return `| ${name} | ${f(a.p50)} / ${f(a.p99)} | ${f(b.p50)} / ${f(b.p99)} | ${f(b.p50 - a.p50)} / ${f(b.p99 - a.p99)} |`;
    }),
  ];
  process.stderr.write(`${lines.join("\n")}\n`);
}

await main();
