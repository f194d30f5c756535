/**
 * `npm run bench [-- --quick]`: the built HTTP service (`node dist/http.js`) against a bare Express
 * endpoint answering the same bytes, for a tools/call of each protocol era (2025: after
 * `initialize`, no `_meta`; 2026-07-28: stateless, `_meta` on the request), alternated in one run.
 * Prints throughput, p50/p99, the ratio, cold start, RSS after load and heap growth over 10,000
 * calls, then PASS/FAIL against the targets.
 * Thresholds live here, never in unit tests. Expects `npm run build` to have run.
 * `BENCH_NODE=/path/to/node npm run bench` runs both servers on another node binary.
 * `BENCH_BASELINE=/path/to/checkout npm run bench` adds that checkout's built service (its own
 * `npm run build` done) to the same alternated run, cold starts and RSS: a change measured before
 * and after, side by side, on one machine at one time.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import autocannon from "autocannon";
import { SEED_ACCEPTED_KEYS } from "../src/storelink/seed.js";
import { startFakeGoogle } from "../test/helpers/google-idp.js";

const quick = process.argv.includes("--quick");
// The node binary both servers run on: this one, or BENCH_NODE (e.g. a Node 22 binary, which is
// what the container runs, when the machine's own node is older).
const NODE = process.env.BENCH_NODE || process.execPath;
const ROOT = fileURLToPath(new URL("..", import.meta.url));
const BASELINE = process.env.BENCH_BASELINE || undefined;
const REPS = quick ? 1 : 3;
const DURATION_S = quick ? 1 : 5;
const CONNECTIONS = quick ? [10] : [10, 50];
const COLD_STARTS = quick ? 1 : 7;
const HEAP_CALLS = quick ? 1_000 : 10_000;

const TARGETS = {
  /** Throughput against bare Express, per era. */
  ratio: { legacy: 0.6, modern: 0.6 },
  p99Factor: 2,
  coldStartMs: 300,
  rssMb: 130,
  // Growth below this over the run is allocator noise, not a leak.
  heapGrowthMb: 2,
};

/** The measured call: live stock for the hero SKU at three stores, in each era's framing. */
const CALL = {
  name: "get_stock_position",
  arguments: { sku: "8847291", store_ids: ["47", "102", "111"] },
};
/**
 * Production authenticates its callers: every call carries one Google ID token (a local stand-in
 * signs it; the server reads its keys through KORRAL_TEST_GOOGLE_CERTS_URL), verified once and
 * then served from the verified-token cache, as a client's calls are.
 */
const google = await startFakeGoogle();
const AUDIENCE = "https://korral-storelink.bench.invalid";
const CALLER = "bench@korral-prod.iam.gserviceaccount.com";
const MCP_HEADERS = {
  "content-type": "application/json",
  accept: "application/json, text/event-stream",
  authorization: `Bearer ${await google.idToken(CALLER, AUDIENCE)}`,
};
const REQUEST = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: CALL });
const HEADERS = { ...MCP_HEADERS, "mcp-protocol-version": "2025-06-18" };
const MODERN_REQUEST = JSON.stringify({
  jsonrpc: "2.0",
  id: 1,
  method: "tools/call",
  params: {
    ...CALL,
    _meta: {
      "io.modelcontextprotocol/protocolVersion": "2026-07-28",
      "io.modelcontextprotocol/clientInfo": { name: "bench", version: "1" },
      "io.modelcontextprotocol/clientCapabilities": {},
    },
  },
});
const MODERN_HEADERS = {
  ...MCP_HEADERS,
  "mcp-protocol-version": "2026-07-28",
  "mcp-method": "tools/call",
  "mcp-name": CALL.name,
};
const ERAS = {
  legacy: { label: "2025-06-18", body: REQUEST, headers: HEADERS },
  modern: { label: "2026-07-28", body: MODERN_REQUEST, headers: MODERN_HEADERS },
} as const;
type Era = keyof typeof ERAS;

const tmp = mkdtempSync(join(tmpdir(), "korral-bench-"));
const keysFile = join(tmp, "keys.json");
writeFileSync(keysFile, JSON.stringify(SEED_ACCEPTED_KEYS));
/** The store policy production requires with authentication: the caller may use every store. */
const policyFile = join(tmp, "policy.json");
writeFileSync(
  policyFile,
  JSON.stringify({
    version: 1,
    groups: { everything: { read: { stores: "*" }, order: { stores: "*" } } },
    principals: { [`svc:${CALLER}`]: ["everything"] },
  }),
);
/** Both servers, every start: ephemeral loopback port, temp keys and logs, no rate limit. */
const SERVER_ENV = {
  ...process.env,
  PORT: "0",
  HOST: "127.0.0.1",
  KORRAL_KEYS_FILE: keysFile,
  KORRAL_LOG_DIR: join(tmp, "log"),
  // The backstop would measure the limiter, not the service.
  KORRAL_RATE_LIMIT_PER_MIN: "0",
  LOG_LEVEL: "info",
  // As the image runs it: production (structured stdout lines, as Cloud Run collects them), with
  // the embedded StoreLink opted into explicitly, since the bench measures the service, not a
  // StoreLink over the network.
  NODE_ENV: "production",
  KORRAL_STORELINK: "embedded",
  // One instance, counting its own limits (npm run bench:limits measures the shared store).
  KORRAL_LIMITS: "per-instance",
  // Production requires the confirmation-state key (Secret Manager's on Cloud Run).
  KORRAL_REQUEST_STATE_KEY: "a-bench-request-state-key-of-32-bytes!!",
  KORRAL_AUTH: "google",
  KORRAL_GOOGLE_AUDIENCES: AUDIENCE,
  KORRAL_TEST_GOOGLE_CERTS_URL: google.certsUrl,
  KORRAL_POLICY_FILE: policyFile,
};
const children = new Set<ChildProcess>();

interface Running {
  child: ChildProcess;
  port: number;
  stderr: () => string;
}

/** Spawns a server and resolves once it logs the port it listens on. */
function start(args: string[], env: Record<string, string> = {}, cwd = ROOT): Promise<Running> {
  const child = spawn(NODE, args, {
    cwd,
    env: { ...SERVER_ENV, ...env },
    stdio: ["ignore", "ignore", "pipe"],
  });
  children.add(child);
  child.on("exit", () => children.delete(child));
  let err = "";
  return new Promise((resolve, reject) => {
    child.stderr?.setEncoding("utf8");
    child.stderr?.on("data", (chunk: string) => {
      err += chunk;
      const match = /"port":([1-9]\d*)/.exec(err);
      if (match) resolve({ child, port: Number(match[1]), stderr: () => err });
    });
    child.once("exit", (code) => reject(new Error(`server exited ${code}: ${err}`)));
  });
}

async function stop(running: Running): Promise<void> {
  if (running.child.exitCode !== null) return;
  const exited = new Promise((resolve) => running.child.once("exit", resolve));
  running.child.kill("SIGTERM");
  await exited;
}

// Exactly what the image runs: `npm run start:http` is the Dockerfile's CMD (a deploy test holds
// them together), node flags included.
const START_HTTP = (
  JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
    scripts: Record<string, string>;
  }
).scripts["start:http"];
const MCP = START_HTTP?.split(" ").slice(1) ?? [];
if (START_HTTP?.split(" ")[0] !== "node" || MCP.at(-1) !== "dist/http.js") {
  throw new Error(`unexpected start:http script: ${START_HTTP}`);
}
const EXPRESS = ["bench/bare-express.mjs"];

function rssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? "NaN");
  return kb / 1024;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] ?? Number.NaN) : ((s[mid - 1] ?? 0) + (s[mid] ?? 0)) / 2;
};

async function load(port: number, connections: number, duration: number, era: Era) {
  const result = await autocannon({
    url: `http://127.0.0.1:${port}/mcp`,
    method: "POST",
    headers: ERAS[era].headers,
    body: ERAS[era].body,
    connections,
    duration,
  });
  if (result.errors || result.non2xx || result.timeouts) {
    throw new Error(
      `load run had failures: ${result.errors} errors, ${result.non2xx} non-2xx, ${result.timeouts} timeouts`,
    );
  }
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99 };
}

async function coldStart(args: string[], cwd = ROOT): Promise<number> {
  const began = performance.now();
  const child = spawn(NODE, args, {
    cwd,
    env: { ...SERVER_ENV, BENCH_BODY_FILE: join(tmp, "body-legacy.json") },
    stdio: ["ignore", "ignore", "pipe"],
  });
  children.add(child);
  let err = "";
  child.stderr?.setEncoding("utf8");
  child.stderr?.on("data", (c: string) => {
    err += c;
  });
  try {
    for (;;) {
      const port = /"port":([1-9]\d*)/.exec(err)?.[1];
      if (port) {
        const ok = await fetch(`http://127.0.0.1:${port}/healthz`).then(
          (r) => r.status === 200,
          () => false,
        );
        if (ok) return performance.now() - began;
      }
      if (child.exitCode !== null) throw new Error(`exited early: ${err}`);
      await new Promise((r) => setTimeout(r, 2));
    }
  } finally {
    const exited = new Promise((r) => child.once("exit", r));
    child.kill("SIGTERM");
    await exited;
    children.delete(child);
  }
}

async function heapGrowth(): Promise<{ beforeMb: number; afterMb: number }> {
  const running = await start(["--expose-gc", "--import", "./bench/heap-probe.mjs", ...MCP]);
  const heap = async (): Promise<number> => {
    const seen = running.stderr().length;
    running.child.kill("SIGUSR2");
    for (;;) {
      const match = /HEAP_USED (\d+)/.exec(running.stderr().slice(seen));
      if (match) return Number(match[1]) / 1024 / 1024;
      await new Promise((r) => setTimeout(r, 10));
    }
  };
  // Half the calls in each era: both paths must hold their memory steady.
  const calls = (amount: number) =>
    Promise.all(
      (Object.keys(ERAS) as Era[]).map((era) => callsOf(era, Math.ceil(amount / 2))),
    ).then(([a, b]) => ({
      non2xx: (a?.non2xx ?? 0) + (b?.non2xx ?? 0),
      errors: (a?.errors ?? 0) + (b?.errors ?? 0),
    }));
  const callsOf = (era: Era, amount: number) =>
    autocannon({
      url: `http://127.0.0.1:${running.port}/mcp`,
      method: "POST",
      headers: ERAS[era].headers,
      body: ERAS[era].body,
      connections: 10,
      amount,
    });
  await calls(quick ? 500 : 2_000); // warm-up: JIT, pools and caches reach their steady size
  const beforeMb = await heap();
  const result = await calls(HEAP_CALLS);
  if (result.non2xx || result.errors) throw new Error("heap run had failures");
  const afterMb = await heap();
  await stop(running);
  return { beforeMb, afterMb };
}

const fmt = (n: number, digits = 0): string => n.toFixed(digits);

async function main(): Promise<void> {
  // Each era's baseline answers exactly the bytes the service answers that era.
  const probe = await start(MCP);
  for (const era of Object.keys(ERAS) as Era[]) {
    const sample = await fetch(`http://127.0.0.1:${probe.port}/mcp`, {
      method: "POST",
      headers: ERAS[era].headers,
      body: ERAS[era].body,
    });
    const body = await sample.text();
    if (sample.status !== 200 || !body.includes('"on_hand"')) {
      throw new Error(`unexpected ${era} tools/call answer ${sample.status}: ${body}`);
    }
    writeFileSync(join(tmp, `body-${era}.json`), body);
    process.stderr.write(
      `${ERAS[era].label} tools/call answer: ${Buffer.byteLength(body)} bytes\n`,
    );
  }
  await stop(probe);

  const mcp = await start(MCP);
  const before = BASELINE === undefined ? undefined : await start(MCP, {}, BASELINE);
  const bare = {
    legacy: await start(EXPRESS, { BENCH_BODY_FILE: join(tmp, "body-legacy.json") }),
    modern: await start(EXPRESS, { BENCH_BODY_FILE: join(tmp, "body-modern.json") }),
  };
  // Warm everything up so the JIT is not measured.
  for (const era of Object.keys(ERAS) as Era[]) {
    await load(mcp.port, 10, 1, era);
    await load(bare[era].port, 10, 1, era);
    if (before) await load(before.port, 10, 1, era);
  }

  type Sample = Awaited<ReturnType<typeof load>>;
  const key = (era: Era, c: number) => `${era} ${c}`;
  const runs = new Map<string, { mcp: Sample[]; bare: Sample[]; before: Sample[] }>();
  for (const era of Object.keys(ERAS) as Era[]) {
    for (const c of CONNECTIONS) runs.set(key(era, c), { mcp: [], bare: [], before: [] });
  }
  const portOf = (which: "mcp" | "bare" | "before", era: Era): number =>
    which === "mcp" ? mcp.port : which === "bare" ? bare[era].port : (before?.port ?? 0);
  for (let rep = 0; rep < REPS; rep++) {
    for (const c of CONNECTIONS) {
      for (const era of Object.keys(ERAS) as Era[]) {
        const slot = runs.get(key(era, c));
        if (!slot) continue;
        // Alternate which goes first: other work on the machine drifts over time.
        const contenders = before
          ? (["mcp", "bare", "before"] as const)
          : (["mcp", "bare"] as const);
        const order = rep % 2 === 0 ? [...contenders] : [...contenders].reverse();
        for (const which of order) {
          const r = await load(portOf(which, era), c, DURATION_S, era);
          slot[which].push(r);
          process.stderr.write(
            `rep ${rep + 1} ${ERAS[era].label} c=${c} ${which}: ${fmt(r.rps)} req/s p50 ${r.p50} p99 ${r.p99}\n`,
          );
        }
      }
    }
  }
  const rss = rssMb(mcp.child.pid ?? 0);
  const bareRss = rssMb(bare.legacy.child.pid ?? 0);
  const beforeRss = before ? rssMb(before.child.pid ?? 0) : Number.NaN;
  if (before) await stop(before);
  await stop(mcp);
  await stop(bare.legacy);
  await stop(bare.modern);

  const colds: number[] = [];
  const bareColds: number[] = [];
  const beforeColds: number[] = [];
  for (let i = 0; i < COLD_STARTS; i++) {
    colds.push(await coldStart(MCP));
    bareColds.push(await coldStart(EXPRESS));
    if (BASELINE) beforeColds.push(await coldStart(MCP, BASELINE));
  }
  const heap = await heapGrowth();

  const lines: string[] = [];
  const verdicts: boolean[] = [];
  const check = (label: string, ok: boolean): string => {
    verdicts.push(ok);
    return `${ok ? "PASS" : "FAIL"}  ${label}`;
  };
  lines.push(
    `\nKorral StoreLink MCP HTTP benchmark${quick ? " (--quick)" : ""}: medians of ${REPS} alternated run(s) of ${DURATION_S}s`,
  );
  const version = execFileSync(NODE, ["--version"], { encoding: "utf8" }).trim();
  lines.push(`node ${version}, ${(await import("node:os")).cpus().length} cpus`);
  lines.push(`service started as the image starts it: ${START_HTTP}\n`);
  lines.push(
    "era | conns | MCP req/s | Express req/s | ratio | MCP p50/p99 ms | Express p50/p99 ms",
  );
  for (const era of Object.keys(ERAS) as Era[]) {
    for (const c of CONNECTIONS) {
      const slot = runs.get(key(era, c));
      if (!slot) continue;
      const m = {
        rps: median(slot.mcp.map((r) => r.rps)),
        p50: median(slot.mcp.map((r) => r.p50)),
        p99: median(slot.mcp.map((r) => r.p99)),
      };
      const b = {
        rps: median(slot.bare.map((r) => r.rps)),
        p50: median(slot.bare.map((r) => r.p50)),
        p99: median(slot.bare.map((r) => r.p99)),
      };
      const ratio = m.rps / b.rps;
      const target = TARGETS.ratio[era];
      lines.push(
        `${ERAS[era].label} | ${c} | ${fmt(m.rps)} | ${fmt(b.rps)} | ${fmt(ratio, 2)}x | ${m.p50}/${m.p99} | ${b.p50}/${b.p99}`,
      );
      lines.push(
        check(
          `${ERAS[era].label} throughput at ${c} connections ${fmt(ratio, 2)}x Express (target >= ${target}x)`,
          ratio >= target,
        ),
      );
      if (c === 50) {
        lines.push(
          check(
            `${ERAS[era].label} p99 at 50 connections ${fmt(m.p99 / Math.max(b.p99, 1), 2)}x Express's (target <= ${TARGETS.p99Factor}x)`,
            m.p99 <= TARGETS.p99Factor * Math.max(b.p99, 1),
          ),
        );
      }
    }
  }
  if (before) {
    lines.push(`\nbefore (${BASELINE}) and after, same run:`);
    lines.push("era | conns | before req/s | after req/s | before ratio | after ratio");
    for (const era of Object.keys(ERAS) as Era[]) {
      for (const c of CONNECTIONS) {
        const slot = runs.get(key(era, c));
        if (!slot) continue;
        const rps = (samples: Sample[]) => median(samples.map((r) => r.rps));
        const b = rps(slot.bare);
        lines.push(
          `${ERAS[era].label} | ${c} | ${fmt(rps(slot.before))} | ${fmt(rps(slot.mcp))} | ${fmt(rps(slot.before) / b, 2)}x | ${fmt(rps(slot.mcp) / b, 2)}x`,
        );
      }
    }
    lines.push(
      `cold start: before ${fmt(median(beforeColds))} ms, after ${fmt(median(colds))} ms; RSS after load: before ${fmt(beforeRss, 1)} MB, after ${fmt(rss, 1)} MB`,
    );
  }
  const cold = median(colds);
  lines.push(
    `\ncold start (spawn -> first 200 on /healthz), median of ${COLD_STARTS}: ${fmt(cold)} ms (bare Express ${fmt(median(bareColds))} ms)`,
  );
  lines.push(
    check(
      `cold start ${fmt(cold)} ms (target <= ${TARGETS.coldStartMs} ms)`,
      cold <= TARGETS.coldStartMs,
    ),
  );
  lines.push(`RSS after load: ${fmt(rss, 1)} MB (bare Express ${fmt(bareRss, 1)} MB)`);
  lines.push(
    check(`RSS after load ${fmt(rss, 1)} MB (target <= ${TARGETS.rssMb} MB)`, rss <= TARGETS.rssMb),
  );
  const growth = heap.afterMb - heap.beforeMb;
  lines.push(
    `heap used after GC: ${fmt(heap.beforeMb, 2)} MB before, ${fmt(heap.afterMb, 2)} MB after ${HEAP_CALLS} calls`,
  );
  lines.push(
    check(
      `heap growth ${fmt(growth, 2)} MB over ${HEAP_CALLS} calls (target < ${TARGETS.heapGrowthMb} MB)`,
      growth < TARGETS.heapGrowthMb,
    ),
  );
  lines.push(`\n${verdicts.every(Boolean) ? "ALL PASS" : "SOME TARGETS MISSED"}`);
  process.stderr.write(`${lines.join("\n")}\n`);
  // --quick is a smoke run on a loaded CI machine: it proves the harness works, not the targets.
  process.exitCode = quick || verdicts.every(Boolean) ? 0 : 1;
}

main()
  .catch((error: unknown) => {
    process.stderr.write(
      `benchmark failed: ${error instanceof Error ? error.stack : String(error)}\n`,
    );
    process.exitCode = 2;
  })
  .finally(() => {
    for (const child of children) child.kill("SIGKILL");
    rmSync(tmp, { recursive: true, force: true });
    void google.close();
  });
