#!/usr/bin/env node
// Runs the official MCP conformance suite against the built HTTP server, twice: 0.1.13 (the
// project's devDependency, the 2025 protocol) and 0.2.x with the 2026-07-28 requirement set (from
// conformance/package.json, on the Node 22 installed there: `npm ci --prefix conformance`).
// Compares each outcome with its section of conformance/expected-failures.json and exits non-zero
// on any unexpected failure AND on any unexpected pass (a stale expectation), so the file always
// says exactly what this server does not do, and why.
//
// Usage: node scripts/conformance.mjs [--no-build]
import { spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const SUITES = [
  {
    name: "2025",
    node: process.execPath,
    cli: join(root, "node_modules/@modelcontextprotocol/conformance/dist/index.js"),
    args: [],
  },
  {
    name: "2026-07-28",
    node: join(root, "conformance/node_modules/node/bin/node"),
    cli: join(root, "conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js"),
    args: ["--requirements", "2026-07-28"],
  },
];
const expectedFile = join(root, "conformance/expected-failures.json");
const say = (line) => process.stderr.write(`${line}\n`);

// A fresh clone has neither suite installed: install what is missing, or say what to run.
if (!existsSync(SUITES[0].cli)) {
  say("conformance: the 2025 suite is not installed; run `npm ci` first");
  process.exit(2);
}
if (!existsSync(SUITES[1].cli) || !existsSync(SUITES[1].node)) {
  say("conformance: installing the 2026-07-28 suite and its Node 22 (npm ci --prefix conformance)");
  const install = spawnSync("npm", ["ci", "--prefix", "conformance", "--no-audit", "--no-fund"], {
    cwd: root,
    stdio: "inherit",
  });
  if (install.status !== 0 || !existsSync(SUITES[1].cli)) {
    say("conformance: could not install it; run `npm ci --prefix conformance` and try again");
    process.exit(2);
  }
}

if (!process.argv.includes("--no-build")) {
  const build = spawnSync("npm", ["run", "build", "--silent"], { cwd: root, stdio: "inherit" });
  if (build.status !== 0) process.exit(build.status ?? 1);
}

async function freePort() {
  const probe = createServer().listen(0, "127.0.0.1");
  await once(probe, "listening");
  const { port } = probe.address();
  probe.close();
  await once(probe, "close");
  return port;
}

async function waitForHealthy(url, child) {
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`server exited with ${child.exitCode}`);
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${url} not healthy in time`);
}

/** scenario -> { passed, failures: [message] } from the suite's per-scenario checks.json. */
function readResults(dir) {
  const results = new Map();
  for (const entry of readdirSync(dir)) {
    const match = /^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$/.exec(entry);
    if (!match) continue;
    const checks = JSON.parse(readFileSync(join(dir, entry, "checks.json"), "utf8"));
    const failures = checks
      .filter((c) => c.status === "FAILURE")
      .map((c) => `${c.id}: ${c.errorMessage ?? "failed"}`);
    results.set(match[1], { passed: failures.length === 0, failures });
  }
  return results;
}

const expectations = JSON.parse(readFileSync(expectedFile, "utf8"));

/** Scenarios a requirement set runs but does not score (extensions, pending), from its summary. */
function unscored(stdout) {
  const at = stdout.indexOf("Not scored");
  if (at === -1) return new Set();
  return new Set([...stdout.slice(at).matchAll(/^\s+[✓✗] (\S+) \(/gmu)].map((m) => m[1]));
}

/** Runs one suite; returns the number of surprises (0: exactly as expected). */
function runSuite(suite, url) {
  const expected = expectations[suite.name];
  const out = join(work, `results-${suite.name}`);
  const started = Date.now();
  const run = spawnSync(suite.node, [suite.cli, "server", "--url", url, "-o", out, ...suite.args], {
    cwd: work,
    encoding: "utf8",
    timeout: 300_000,
  });
  if (run.error) throw run.error;
  const skip = unscored(run.stdout);
  const results = readResults(out);
  for (const scenario of skip) results.delete(scenario);
  if (results.size === 0)
    throw new Error(`the ${suite.name} suite produced no results:\n${run.stdout}\n${run.stderr}`);

  const unexpectedFailures = [];
  const unexpectedPasses = [];
  for (const [scenario, result] of results) {
    const isExpected = Object.hasOwn(expected, scenario);
    if (!result.passed && !isExpected) unexpectedFailures.push([scenario, result.failures]);
    if (result.passed && isExpected) unexpectedPasses.push(scenario);
  }
  const notRun = Object.keys(expected).filter((s) => !results.has(s));

  const passed = [...results.values()].filter((r) => r.passed).length;
  say(
    `conformance ${suite.name}: ${results.size} scored scenarios, ${passed} passed, ` +
      `${results.size - passed} failed (${Object.keys(expected).length} expected to fail)` +
      `${skip.size > 0 ? `, ${skip.size} not scored` : ""} in ${((Date.now() - started) / 1000).toFixed(1)} s`,
  );
  for (const [scenario, failures] of unexpectedFailures) {
    say(`UNEXPECTED FAILURE ${suite.name} ${scenario}\n  ${failures.join("\n  ")}`);
  }
  for (const scenario of unexpectedPasses) {
    say(
      `UNEXPECTED PASS ${suite.name} ${scenario}: it now passes; remove it from conformance/expected-failures.json`,
    );
  }
  for (const scenario of notRun) {
    say(`STALE EXPECTATION ${suite.name} ${scenario}: the suite no longer runs it; remove it`);
  }
  return unexpectedFailures.length + unexpectedPasses.length + notRun.length;
}
const work = mkdtempSync(join(tmpdir(), "korral-conformance-"));
const port = await freePort();
const server = spawn(process.execPath, [join(root, "dist/http.js")], {
  cwd: root,
  env: {
    ...process.env,
    PORT: String(port),
    HOST: "127.0.0.1",
    KORRAL_KEYS_FILE: join(root, "keys.example.json"),
    KORRAL_LOG_DIR: join(work, "log"),
    LOG_LEVEL: "warn",
    // One key, as a deployment has (without one the server says so at start).
    KORRAL_REQUEST_STATE_KEY: "conformance-request-state-key-of-32-bytes",
  },
  stdio: ["ignore", "ignore", "inherit"],
});

let code = 1;
try {
  const base = `http://127.0.0.1:${port}`;
  await waitForHealthy(`${base}/healthz`, server);
  let surprises = 0;
  for (const suite of SUITES) surprises += runSuite(suite, `${base}/mcp`);
  code = surprises === 0 ? 0 : 1;
  say(code === 0 ? "conformance: as expected" : "conformance: FAILED");
} catch (error) {
  say(`conformance: could not run: ${error instanceof Error ? error.message : String(error)}`);
  code = 1;
} finally {
  server.kill("SIGTERM");
  rmSync(work, { recursive: true, force: true });
}
process.exit(code);
