/**
 * `tsx bench/profile-top.ts <file.cpuprofile> [more.cpuprofile ...]`: where a profiled server
 * (BENCH_CPU_PROF in bench/http.ts) spent its CPU. Self time per frame, the bundle's frames mapped
 * back to their sources through dist's source maps, grouped by origin (OpenTelemetry's packages,
 * src/telemetry and the traced StoreLink, other dependencies, the rest of src, node itself,
 * GC), then the top frames overall and the top frames of the telemetry code.
 */
import { readFileSync } from "node:fs";
import { SourceMap } from "node:module";
import { fileURLToPath } from "node:url";

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const TOP = 25;
const maps = new Map<string, SourceMap | undefined>();
function mapOf(url: string): SourceMap | undefined {
  if (!url.startsWith("file://")) return undefined;
  if (!maps.has(url)) {
    try {
      maps.set(url, new SourceMap(JSON.parse(readFileSync(`${fileURLToPath(url)}.map`, "utf8"))));
    } catch {
      maps.set(url, undefined);
    }
  }
  return maps.get(url);
}

/** The frame's source location: the original file and line when the bundle's map knows it. */
function where(frame: CallFrame): string {
  if (frame.url === "") return "";
  const entry = mapOf(frame.url)?.findEntry(frame.lineNumber, frame.columnNumber);
  if (entry !== undefined && "originalSource" in entry && entry.originalSource) {
    const source = entry.originalSource.replace(/^.*?\/(node_modules|src)\//, "$1/");
    return `${source}:${entry.originalLine + 1}`;
  }
  return `${frame.url.replace(/^.*\//, "")}:${frame.lineNumber + 1}`;
}

function originOf(name: string, at: string): string {
  if (name === "(garbage collector)") return "GC";
  if (name === "(idle)" || name === "(program)") return name;
  if (at.includes("node_modules/@opentelemetry/")) return "@opentelemetry/*";
  if (/src\/telemetry\/|src\/mcp\/traced-storelink/.test(at))
    return "src/telemetry + traced StoreLink";
  if (at.startsWith("node_modules/")) return "other dependencies";
  if (at.startsWith("src/")) return "src (rest)";
  return "node (internals, natives)";
}

const isTelemetry = (origin: string): boolean =>
  origin === "@opentelemetry/*" || origin.startsWith("src/telemetry");

for (const file of process.argv.slice(2)) {
  const profile = JSON.parse(readFileSync(file, "utf8")) as Profile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  profile.samples.forEach((id, i) => {
    self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  });
  const frames = new Map<string, { us: number; origin: string }>();
  const origins = new Map<string, number>();
  let total = 0;
  let busy = 0;
  for (const [id, us] of self) {
    const frame = byId.get(id)?.callFrame;
    if (frame === undefined) continue;
    const at = where(frame);
    const name = frame.functionName || "(anonymous)";
    const origin = originOf(name, at);
    const label = `${name} ${at}`;
    const entry = frames.get(label) ?? { us: 0, origin };
    entry.us += us;
    frames.set(label, entry);
    origins.set(origin, (origins.get(origin) ?? 0) + us);
    total += us;
    if (origin !== "(idle)") busy += us;
  }
  const pct = (us: number) => `${((100 * us) / busy).toFixed(1)}%`;
  const ms = (us: number) => `${(us / 1000).toFixed(0)} ms`;
  const lines = [`\n${file}: ${ms(total)} sampled, ${ms(busy)} not idle (percentages of that)`];
  lines.push("\nself time by origin:");
  for (const [origin, us] of [...origins].sort((a, b) => b[1] - a[1])) {
    if (origin !== "(idle)")
      lines.push(`  ${pct(us).padStart(6)} ${ms(us).padStart(8)}  ${origin}`);
  }
  const sorted = [...frames]
    .filter(([, f]) => f.origin !== "(idle)")
    .sort((a, b) => b[1].us - a[1].us);
  lines.push(`\ntop ${TOP} frames by self time:`);
  for (const [label, f] of sorted.slice(0, TOP)) {
    lines.push(`  ${pct(f.us).padStart(6)} ${ms(f.us).padStart(8)}  ${label}`);
  }
  const telemetry = sorted.filter(([, f]) => isTelemetry(f.origin));
  if (telemetry.length > 0) {
    lines.push(`\ntop ${TOP} frames of the telemetry code:`);
    for (const [label, f] of telemetry.slice(0, TOP)) {
      lines.push(`  ${pct(f.us).padStart(6)} ${ms(f.us).padStart(8)}  ${label}`);
    }
  }
  process.stdout.write(`${lines.join("\n")}\n`);
}
