/**
 * `npm run bench:stops [-- --count=50 --busy=3]`: clean stops of the built entries, in a row, each
 * a fresh process on its own temp log directory: HTTP stopped by SIGTERM, SIGINT and SIGHUP (after
 * one kept-alive request), stdio by SIGTERM sent the moment its ready line appears and by the end
 * of stdin. `--busy=N` runs N busy loops beside them (the loaded machine of issue 29). Prints, per
 * kind, how many exited 0 and how many were killed, and the time from the stop to the exit (p50,
 * max); exits 1 when any clean stop did not exit 0. `--hung=N` adds N stops whose exit hangs (the
 * key file a FIFO nobody writes, a read stuck in the thread pool), as the container runs them: the
 * image's tini as PID 1 of a PID namespace of its own (`unshare`, as root), and checks each ends
 * within the grace plus 2 s. Expects `npm run build` to have run.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const arg = (name: string, fallback: number): number => {
  const found = process.argv.find((a) => a.startsWith(`--${name}=`));
  return found ? Number(found.split("=")[1]) : fallback;
};
const COUNT = arg("count", 50);
const BUSY = arg("busy", 0);
const HUNG = arg("hung", 0);
const HUNG_GRACE_MS = 500;
const DIST = fileURLToPath(new URL("../dist/", import.meta.url));
const READY = {
  http: /listening on HTTP/,
  stdio: /MCP server running on stdio/,
};

type Kind = { entry: "http" | "stdio"; stop: "SIGTERM" | "SIGINT" | "SIGHUP" | "end of stdin" };
const KINDS: Kind[] = [
  { entry: "http", stop: "SIGTERM" },
  { entry: "http", stop: "SIGINT" },
  { entry: "http", stop: "SIGHUP" },
  { entry: "stdio", stop: "SIGTERM" },
  { entry: "stdio", stop: "end of stdin" },
];

interface Outcome {
  code: number | null;
  signal: NodeJS.Signals | null;
  ms: number;
}

async function oneStop({ entry, stop }: Kind): Promise<Outcome> {
  const logDir = mkdtempSync(join(tmpdir(), "korral-bench-stops-"));
  const child = spawn(process.execPath, [join(DIST, `${entry}.js`)], {
    env: { ...process.env, KORRAL_LOG_DIR: logDir, HOST: "127.0.0.1", PORT: "0" },
    stdio: ["pipe", "ignore", "pipe"],
  });
  const exited = once(child, "exit") as Promise<[number | null, NodeJS.Signals | null]>;
  let stderr = "";
  let stoppedAt = 0n;
  const ready = new Promise<void>((resolve) => {
    child.stderr?.setEncoding("utf8");
    child.stderr?.on("data", (chunk: string) => {
      stderr += chunk;
      if (stoppedAt === 0n && READY[entry].test(stderr)) resolve();
    });
  });
  if ((await Promise.race([ready.then(() => "ready"), exited])) !== "ready") {
    // Exited before its ready line (a start that failed): counted, with its status, as unclean.
    const [code, signal] = await exited;
    rmSync(logDir, { recursive: true, force: true });
    return { code: code ?? -1, signal, ms: 0 };
  }
  if (entry === "http") {
    const port = /"port":(\d+)[^\n]*listening on HTTP/.exec(stderr)?.[1];
    await fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.text());
  }
  stoppedAt = process.hrtime.bigint();
  if (stop === "end of stdin") child.stdin?.end();
  else child.kill(stop);
  const [code, signal] = await exited;
  const ms = Number(process.hrtime.bigint() - stoppedAt) / 1e6;
  rmSync(logDir, { recursive: true, force: true });
  return { code, signal, ms };
}

const say = (line: string) => process.stdout.write(`${line}\n`);
/**
 * One stop whose exit hangs: the image's ENTRYPOINT (tini) and node as PID 1 of a new PID
 * namespace, a create answered (its key read stuck), then SIGTERM to PID 1.
 */
async function oneHungStop(): Promise<Outcome> {
  const dir = mkdtempSync(join(tmpdir(), "korral-bench-hung-"));
  const fifo = join(dir, "keys.json");
  execFileSync("mkfifo", [fifo]);
  const server = spawn(
    "unshare",
    [
      "--pid",
      "--fork",
      "--mount-proc",
      "--kill-child",
      "/usr/bin/tini",
      "--",
      process.execPath,
      join(DIST, "http.js"),
    ],
    {
      env: {
        ...process.env,
        KORRAL_KEYS_FILE: fifo,
        KORRAL_KEY_DEADLINE_MS: "200",
        KORRAL_SHUTDOWN_GRACE_MS: String(HUNG_GRACE_MS),
        KORRAL_LOG_DIR: join(dir, "log"),
        HOST: "127.0.0.1",
        PORT: "0",
      },
      stdio: ["ignore", "ignore", "pipe"],
    },
  );
  const exited = once(server, "exit") as Promise<[number | null, NodeJS.Signals | null]>;
  let stderr = "";
  server.stderr?.setEncoding("utf8");
  await new Promise<void>((resolve) => {
    server.stderr?.on("data", (chunk: string) => {
      stderr += chunk;
      if (READY.http.test(stderr)) resolve();
    });
  });
  const port = /"port":(\d+)[^\n]*listening on HTTP/.exec(stderr)?.[1];
  await fetch(`http://127.0.0.1:${port}/mcp`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "tools/call",
      params: {
        name: "create_replenishment_order",
        arguments: { store_id: "47", sku: "8847291", quantity: 24, reason: "bench: hung exit" },
      },
    }),
  }).then((r) => r.text());
  const pid1 = Number(execFileSync("pgrep", ["-P", String(server.pid)], { encoding: "utf8" }));
  const stoppedAt = process.hrtime.bigint();
  process.kill(pid1, "SIGTERM");
  const [code, signal] = await exited;
  const ms = Number(process.hrtime.bigint() - stoppedAt) / 1e6;
  rmSync(dir, { recursive: true, force: true });
  return { code, signal, ms };
}

const busy: ChildProcess[] = [];
for (let i = 0; i < BUSY; i++) {
  busy.push(spawn("sh", ["-c", "while :; do :; done"], { stdio: "ignore" }));
}
const quantile = (sorted: number[], q: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;

let failed = 0;
try {
  say(`${COUNT} clean stops per kind, in a row, beside ${BUSY} busy loop(s)`);
  for (const kind of COUNT > 0 ? KINDS : []) {
    const outcomes: Outcome[] = [];
    for (let i = 0; i < COUNT; i++) outcomes.push(await oneStop(kind));
    const clean = outcomes.filter((o) => o.code === 0).length;
    const killed = outcomes.filter((o) => o.signal === "SIGKILL").length;
    const other = outcomes
      .filter((o) => o.code !== 0 && o.signal !== "SIGKILL")
      .map((o) => o.signal ?? `exit ${o.code}`);
    const ms = outcomes.map((o) => o.ms).sort((a, b) => a - b);
    failed += COUNT - clean;
    say(
      `${`${kind.entry} ${kind.stop}`.padEnd(20)} exit 0: ${clean}/${COUNT}  SIGKILL: ${killed}` +
        `${other.length ? `  other: ${other.join(", ")}` : ""}` +
        `  stop→exit p50 ${quantile(ms, 0.5).toFixed(0)} ms, max ${quantile(ms, 1).toFixed(0)} ms`,
    );
  }
  if (HUNG > 0 && process.getuid?.() === 0 && existsSync("/usr/bin/tini")) {
    const outcomes: Outcome[] = [];
    for (let i = 0; i < HUNG; i++) outcomes.push(await oneHungStop());
    const ms = outcomes.map((o) => o.ms).sort((a, b) => a - b);
    const late = ms.filter((m) => m > HUNG_GRACE_MS + 2_000).length;
    failed += late;
    say(
      `${"hung exit, PID 1".padEnd(20)} ended: ${outcomes.length}/${HUNG} (exit ${[
        ...new Set(outcomes.map((o) => o.code)),
      ].join(", ")})  past grace + 2 s: ${late}` +
        `  stop→exit p50 ${quantile(ms, 0.5).toFixed(0)} ms, max ${quantile(ms, 1).toFixed(0)} ms`,
    );
  } else if (HUNG > 0) {
    say("hung exits skipped: they need root, unshare and /usr/bin/tini");
  }
} finally {
  for (const loop of busy) loop.kill("SIGKILL");
}
say(failed === 0 ? "PASS" : `FAIL: ${failed} stop(s) unclean or late`);
process.exitCode = failed === 0 ? 0 : 1;
