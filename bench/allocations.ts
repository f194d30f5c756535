/**
 * `npm run bench:allocations`: the bytes the built service allocates per call (garbage included),
 * for a three-store `get_stock_position` read (2025-06-18, 50 connections), with telemetry off
 * and on (as `bench:telemetry` samples it). V8's sampling heap profiler counts them in the served
 * process (bench/heap-sampler.mjs) over BENCH_CALLS calls after a warm-up; prints the total per
 * call and the functions that allocate most, mapped to their source. Allocation drives garbage
 * collection, a large share of a read's CPU: unlike req/s, bytes per call do not move with the
 * machine's load, so a change's effect shows in one run. `BENCH_BASELINE=/path/to/checkout` (built)
 * measures that tree too, telemetry off: a change before and after.
 *
 * It also prints the bytes promoted to V8's old generation per call and the full collections,
 * from `--trace-gc-nvp` over calls made between the warm-up and the sampling: objects that
 * outlive two young-generation collections cost a copy each and, in the end, a full collection.
 * `BENCH_SURVIVORS=1` counts only the objects no young-generation collection freed, so the
 * listing names the functions whose objects are promoted (read it beside the promotion figure:
 * under the sampler one site, zod's parse of the tool's output, shows about 1 KB a call that
 * the unsampled count does not see promoted). The service runs as the image starts
 * it (`npm run start:http`'s node flags), on `BENCH_NODE` if set.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { SourceMap } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import autocannon from "autocannon";
import { SEED_ACCEPTED_KEYS } from "../src/storelink/seed.js";
import { startOtlpSink } from "./otlp-sink.js";
import { startHttpArgs } from "./start-command.js";

const CALLS = Number(process.env.BENCH_CALLS) || 50_000;
const TOP = Number(process.env.BENCH_TOP) || 15;
const ROOT = fileURLToPath(new URL("..", import.meta.url));
const SAMPLER = fileURLToPath(new URL("./heap-sampler.mjs", import.meta.url));
const BASELINE = process.env.BENCH_BASELINE || undefined;
const NODE = process.env.BENCH_NODE || process.execPath;
const SURVIVORS = process.env.BENCH_SURVIVORS === "1";
const START_FLAGS = startHttpArgs(ROOT).flags;
const tmp = mkdtempSync(join(tmpdir(), "korral-alloc-"));
writeFileSync(join(tmp, "keys.json"), JSON.stringify(SEED_ACCEPTED_KEYS));

const READ = JSON.stringify({
  jsonrpc: "2.0",
  id: 1,
  method: "tools/call",
  params: {
    name: "get_stock_position",
    arguments: { sku: "8847291", store_ids: ["47", "102", "111"] },
  },
});
const HEADERS = {
  "content-type": "application/json",
  accept: "application/json, text/event-stream",
  "mcp-protocol-version": "2025-06-18",
};

interface ProfileNode {
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
  selfSize: number;
  children: ProfileNode[];
}

const maps = new Map<string, SourceMap | undefined>();
/** `function file:line` of a frame, through the bundle's source map when it has one. */
function frameOf({ functionName, url, lineNumber, columnNumber }: ProfileNode["callFrame"]) {
  const name = functionName || "(anonymous)";
  if (!url.startsWith("file://")) return url ? `${name} ${url}` : name;
  if (!maps.has(url)) {
    try {
      const map = JSON.parse(readFileSync(`${fileURLToPath(url)}.map`, "utf8"));
      maps.set(url, new SourceMap(map));
    } catch {
      maps.set(url, undefined);
    }
  }
  const entry = maps.get(url)?.findEntry(lineNumber, columnNumber);
  if (entry && "originalSource" in entry) {
    const source = entry.originalSource.replace(/^.*?\/(node_modules|src)\//, "$1/");
    return `${name} ${source}:${entry.originalLine + 1}`;
  }
  return `${name} ${url.replace(/^.*\//, "")}:${lineNumber + 1}`;
}

/** Bytes per call in all, and by the function that allocated them. */
function tally(profile: { head: ProfileNode }, calls: number) {
  const bySite = new Map<string, number>();
  let total = 0;
  const visit = (node: ProfileNode): void => {
    total += node.selfSize;
    if (node.selfSize > 0) {
      const site = frameOf(node.callFrame);
      bySite.set(site, (bySite.get(site) ?? 0) + node.selfSize);
    }
    for (const child of node.children) visit(child);
  };
  visit(profile.head);
  const top = [...bySite].sort((a, b) => b[1] - a[1]).slice(0, TOP);
  return {
    perCall: total / calls,
    top: top.map(([site, bytes]) => [site, bytes / calls] as const),
    bySite: new Map([...bySite].map(([site, bytes]) => [site, bytes / calls])),
  };
}

async function measure(label: string, env: Record<string, string>, root = ROOT) {
  const out = join(tmp, `${label}.heapprofile`);
  const flags = ["--trace-gc-nvp", ...START_FLAGS, "--import", SAMPLER];
  const child = spawn(NODE, [...flags, "dist/http.js"], {
    cwd: root,
    env: {
      ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("OTEL_"))),
      PORT: "0",
      HOST: "127.0.0.1",
      NODE_ENV: "development",
      KORRAL_STORELINK: "embedded",
      KORRAL_LIMITS: "per-instance",
      KORRAL_KEYS_FILE: join(tmp, "keys.json"),
      KORRAL_LOG_DIR: join(tmp, `log-${label}`),
      KORRAL_RATE_LIMIT_PER_MIN: "0",
      HEAP_SAMPLE_OUT: out,
      ...(SURVIVORS ? { HEAP_SAMPLE_SURVIVORS: "1" } : {}),
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  // V8's line per collection; any other output on stdout is skipped.
  let promoted = 0;
  let fullCollections = 0;
  let partial = "";
  child.stdout.setEncoding("utf8");
  child.stdout.on("data", (chunk: string) => {
    const lines = (partial + chunk).split("\n");
    partial = lines.pop() ?? "";
    for (const line of lines) {
      if (line.includes(" gc=s ")) promoted += Number(/ promoted=(\d+)/.exec(line)?.[1] ?? 0);
      else if (line.includes(" gc=mc ")) fullCollections++;
    }
  });
  let err = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (chunk: string) => {
    err += chunk;
  });
  const waitFor = async (pattern: RegExp): Promise<RegExpExecArray> => {
    for (;;) {
      const match = pattern.exec(err);
      if (match) return match;
      if (child.exitCode !== null) throw new Error(`server exited: ${err}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  };
  try {
    const port = Number((await waitFor(/"port":([1-9]\d*)/))[1]);
    const calls = (amount: number) =>
      autocannon({
        url: `http://127.0.0.1:${port}/mcp`,
        method: "POST",
        headers: HEADERS,
        body: READ,
        connections: 50,
        amount,
      });
    await calls(Math.min(CALLS, 10_000)); // warm-up: JIT, pools and caches in place
    // Promotion is counted without the sampler, whose handles on sampled objects change what the
    // collector keeps. V8 writes its line before it goes on; the pause lets this process read it.
    const settle = () => new Promise((resolve) => setTimeout(resolve, 100));
    await settle();
    const [promotedBefore, fullBefore] = [promoted, fullCollections];
    const window = await calls(Math.min(CALLS, 20_000));
    await settle();
    const promotion = {
      promotedPerCall: (promoted - promotedBefore) / window.requests.total,
      fullCollections: fullCollections - fullBefore,
      promotionCalls: window.requests.total,
    };
    child.kill("SIGUSR2");
    await waitFor(/HEAP_SAMPLING/);
    const result = await calls(CALLS);
    if (result.non2xx || result.errors) throw new Error(`${label}: failed calls`);
    child.kill("SIGUSR2");
    await waitFor(/HEAP_SAMPLED/);
    return { ...tally(JSON.parse(readFileSync(out, "utf8")), result.requests.total), ...promotion };
  } finally {
    child.kill("SIGTERM");
  }
}

const sink = await startOtlpSink();
try {
  const before = BASELINE === undefined ? undefined : await measure("before", {}, BASELINE);
  const off = await measure("off", {});
  const on = await measure("on", {
    OTEL_EXPORTER_OTLP_ENDPOINT: sink.url,
    OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
    OTEL_TRACES_SAMPLER_ARG: "0.1",
  });
  const promotion = (m: typeof off) =>
    `${m.promotedPerCall.toFixed(0)} B per call, ${m.fullCollections} full collections in ${m.promotionCalls} calls`;
  const lines = [
    SURVIVORS
      ? `\nbytes per three-store read that no young-generation collection freed (promoted or still alive; 2025-06-18, 50 connections, ${CALLS} calls)`
      : `\nbytes allocated per three-store read (2025-06-18, 50 connections, ${CALLS} calls, garbage included)`,
    `telemetry off: ${off.perCall.toFixed(0)} B; on: ${on.perCall.toFixed(0)} B (+${(on.perCall - off.perCall).toFixed(0)})`,
    ...(before ? [`before (${BASELINE}), telemetry off: ${before.perCall.toFixed(0)} B`] : []),
    `promoted to the old generation (unsampled calls): off ${promotion(off)}; on ${promotion(on)}`,
    ...(before ? [`before, telemetry off: ${promotion(before)}`] : []),
    "\nmost allocated, telemetry off (bytes per call, function where allocated):",
    ...off.top.map(([site, bytes]) => `${bytes.toFixed(0).padStart(7)}  ${site}`),
    "\nwhat telemetry on adds (bytes per call, on minus off, function where allocated):",
    ...[...new Set([...on.bySite.keys(), ...off.bySite.keys()])]
      .map((site) => [site, (on.bySite.get(site) ?? 0) - (off.bySite.get(site) ?? 0)] as const)
      .sort((a, b) => b[1] - a[1])
      .slice(0, TOP)
      .map(([site, bytes]) => `${bytes.toFixed(0).padStart(7)}  ${site}`),
  ];
  process.stdout.write(`${lines.join("\n")}\n`);
} finally {
  await sink.close();
}
