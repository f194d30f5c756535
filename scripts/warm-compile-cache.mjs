// Starts the service once, as the image will start it, so that Node's compile cache
// (NODE_COMPILE_CACHE, Node 22.1 and later) holds the code a start compiles: every later start
// reads it instead of compiling. The Dockerfile runs this in the runtime stage, as the user the
// service runs as (the cache is kept per user id), with the CMD's own node flags (the cache is
// kept per V8 flag set): `node scripts/warm-compile-cache.mjs <the CMD>`.
//
// The start is configured as DEPLOYMENT.md configures the service, with nothing reachable: the
// StoreLink URL, the limits store and the OTLP endpoint point at a closed loopback port, and
// Secret Manager gets a service account made up here (its client starts without a request). So
// the modules a deployment loads at start (Secret Manager's client, the Redis client, telemetry)
// are compiled and cached too. The server is stopped with SIGTERM once it listens. A start that
// fails, or a cache left empty, fails the build: an image whose start is broken never ships.
import { spawn } from "node:child_process";
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const command = process.argv.slice(2);
const cacheDir = process.env.NODE_COMPILE_CACHE;
if (command.length === 0 || cacheDir === undefined) {
  process.stderr.write(
    "usage: NODE_COMPILE_CACHE=<dir> node scripts/warm-compile-cache.mjs <command>\n",
  );
  process.exit(2);
}

const CLOSED = "127.0.0.1:9";
const work = mkdtempSync(join(tmpdir(), "warm-compile-cache-"));
const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
const credentials = join(work, "service-account.json");
writeFileSync(
  credentials,
  JSON.stringify({
    type: "service_account",
    project_id: "warm-compile-cache",
    client_email: "warm@warm-compile-cache.iam.gserviceaccount.com",
    private_key: privateKey.export({ type: "pkcs8", format: "pem" }),
  }),
);
const policy = join(work, "policy.json");
writeFileSync(policy, JSON.stringify({ version: 1, groups: {}, principals: {} }));

const env = {
  PATH: process.env.PATH ?? "",
  HOME: work,
  NODE_ENV: "production",
  NODE_COMPILE_CACHE: cacheDir,
  HOST: "127.0.0.1",
  PORT: "0",
  STORELINK_URL: `http://${CLOSED}`,
  KORRAL_REQUEST_STATE_KEY: randomBytes(32).toString("base64url"),
  KORRAL_REDIS_URL: `redis://${CLOSED}`,
  KORRAL_AUTH: "google",
  KORRAL_GOOGLE_AUDIENCES: "https://warm-compile-cache.invalid",
  KORRAL_KEY_SOURCE: "secret-manager",
  GOOGLE_CLOUD_PROJECT: "warm-compile-cache",
  GOOGLE_APPLICATION_CREDENTIALS: credentials,
  KORRAL_POLICY_FILE: policy,
  KORRAL_LOG_FILES: "off",
  OTEL_EXPORTER_OTLP_ENDPOINT: `http://${CLOSED}`,
};

// The server dies with this script (setpriv's parent-death signal, where there is one: Debian's
// util-linux), and so does the made-up key on a SIGTERM or SIGINT of the script.
const SETPRIV = "/usr/bin/setpriv";
const [file, ...args] = existsSync(SETPRIV)
  ? [SETPRIV, "--pdeathsig", "KILL", "--", ...command]
  : command;
const server = spawn(file, args, { env, stdio: ["ignore", "pipe", "pipe"] });
for (const signal of ["SIGTERM", "SIGINT"]) {
  process.once(signal, () => {
    server.kill("SIGKILL");
    rmSync(work, { recursive: true, force: true });
    process.exit(1);
  });
}
let output = "";
let listening = false;
const read = (chunk) => {
  output += chunk;
  if (!listening && output.includes("listening on HTTP")) {
    listening = true;
    server.kill("SIGTERM");
  }
};
server.stdout.setEncoding("utf8").on("data", read);
server.stderr.setEncoding("utf8").on("data", read);
// The limits store's wait at start is 5 s; a start that takes six times that is broken.
const timer = setTimeout(() => server.kill("SIGKILL"), 30_000);
const [code, signal] = await new Promise((resolve) => {
  server.on("exit", (exitCode, exitSignal) => resolve([exitCode, exitSignal]));
});
clearTimeout(timer);
rmSync(work, { recursive: true, force: true });

// Files only: this script's own process makes its (empty) directory at its start, and writes
// its own entries only at its exit.
let cached = 0;
try {
  cached = readdirSync(cacheDir, { recursive: true, withFileTypes: true }).filter((entry) =>
    entry.isFile(),
  ).length;
} catch {
  // No cache directory: nothing was cached.
}
if (!listening || code !== 0 || cached === 0) {
  process.stderr.write(
    `warm-compile-cache: the start did not listen and stop cleanly (listening: ${listening}, exit ${code ?? signal}, ${cached} cache entries):\n${output}\n`,
  );
  process.exit(1);
}
process.stdout.write(`warm-compile-cache: ${cached} entries in ${cacheDir}\n`);
// Not held open by anything the server left behind.
process.exit(0);
