import { randomBytes } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { chmod, chown, cp, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { request as httpRequest } from "node:http";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SEED_ACCEPTED_KEYS } from "../../src/storelink/seed.js";
import { type Child, startEmulatorProcess } from "../e2e/processes.js";
import { cacheUse, cmdOf, NODE_22, warmRunOf } from "../helpers/compile-cache.js";
import { type FakeGoogle, startFakeGoogle } from "../helpers/google-idp.js";
import { type RunningRedis, startRedis } from "../helpers/redis.js";
import {
  freePort,
  listening,
  runOk,
  runProcess,
  type Spawned,
  spawnProcess,
  waitForHealthy,
} from "../helpers/spawn.js";

/**
 * Rehearses the Dockerfile's runtime stage and DEPLOYMENT.md without Docker or Google Cloud:
 * package.json + package-lock.json + dist/ in an empty directory, `npm ci --omit=dev`, then
 * `node dist/http.js` started with the image's ENV and the environment DEPLOYMENT.md's section 5
 * gives the service (read from the document, with the StoreLink emulator standing in for
 * StoreLink, a fabricated CA certificate for the internal CA mounted from Secret Manager, and the
 * store policy section 3 publishes read from a file), and
 * section 9's smoke test run against it. A runtime dependency left in devDependencies fails here, as it would in the
 * image. When the tests run as root, the server runs as `nobody` over root-owned, read-only
 * files, as the image's `node` user does.
 */
const root = join(import.meta.dirname, "../..");
const NOBODY = 65534;
const read = (file: string) => readFileSync(join(root, file), "utf8");
const SETPRIV = "/usr/bin/setpriv";

const asRoot = process.getuid?.() === 0;
const dropPrivileges = asRoot && existsSync(SETPRIV);

/** Joins the document's shell lines (continuations folded), in order, from `from` to `to`. */
function shellLines(markdown: string, from: string, to: string): string[] {
  const section = markdown.slice(markdown.indexOf(from), markdown.indexOf(to));
  return [...section.matchAll(/```bash\n([\s\S]*?)```/g)]
    .map((m) => (m[1] as string).replace(/\\\n\s*/g, " "))
    .join("\n")
    .split("\n")
    .map((line) => line.trim());
}

/** `$NAME` and `${NAME}` from `vars`; an unknown name fails the rehearsal. */
function expand(text: string, vars: Record<string, string>): string {
  return text.replace(/\$\{?([A-Z_][A-Z0-9_]*)\}?/g, (_m, name: string) => {
    const value = vars[name];
    if (value === undefined) throw new Error(`DEPLOYMENT.md uses $${name} before setting it`);
    return value;
  });
}

/** A gcloud `--set-env-vars`/`--update-env-vars` value, with its `^X^` delimiter syntax. */
function envVarsOf(value: string): Record<string, string> {
  const custom = /^\^(.)\^/.exec(value);
  const list = custom ? value.slice(3).split(custom[1] as string) : value.split(",");
  return Object.fromEntries(
    list.map((pair) => [pair.slice(0, pair.indexOf("=")), pair.slice(pair.indexOf("=") + 1)]),
  );
}

const unquote = (value: string): string =>
  value.replace(/^"(.*)"$/, "$1").replace(/^'(.*)'$/, "$1");

/**
 * Follows DEPLOYMENT.md from its first line to the end of section 5, as an operator would:
 * every `export` in order (the command substitutions, which ask Google Cloud, are answered by
 * `answers`), then the deploy command's variables and the update that follows it. A secret's
 * value is `secretValues`' (the limits store's URL), else a fresh random one.
 */
function serviceEnvFromDeploymentMd(
  answers: Record<string, string>,
  secretValues: Record<string, string> = {},
) {
  const lines = shellLines(read("DEPLOYMENT.md"), "# Deploying", "## 6.");
  const vars: Record<string, string> = {};
  let env: Record<string, string> | undefined;
  /** Secrets mounted as files (`/path=secret:version`), by path. */
  const mounts: string[] = [];
  for (const line of lines) {
    const exported = /^export ([A-Z_]+)=(.*?)(\s+#.*)?$/.exec(line);
    if (exported) {
      const [, name = "", value = ""] = exported;
      vars[name] = answers[name] ?? expand(unquote(value), vars);
      continue;
    }
    const setVars = /^gcloud run deploy .*--set-env-vars=("[^"]*"|\S+)/.exec(line);
    if (setVars) env = envVarsOf(expand(unquote(setVars[1] as string), vars));
    // Each secret mounted as a variable: Secret Manager's value stands in as a fresh random one.
    const secrets = /^gcloud run deploy .*--set-secrets=(\S+)/.exec(line);
    if (secrets && env) {
      for (const name of Object.keys(envVarsOf(secrets[1] as string))) {
        if (name.startsWith("/")) mounts.push(name);
        else env[name] = secretValues[name] ?? randomBytes(36).toString("base64");
      }
    }
    const update = /^gcloud run services update .*--update-env-vars=("[^"]*"|\S+)/.exec(line);
    if (update && env) Object.assign(env, envVarsOf(expand(unquote(update[1] as string), vars)));
  }
  if (!env) throw new Error("DEPLOYMENT.md section 5 has no gcloud run deploy --set-env-vars");
  return { env, vars, mounts };
}

/** Section 3's first store policy, as the document writes it (its `cat > "$POLICY_FILE"`). */
function policyFromDeploymentMd(vars: Record<string, string>): string {
  const text = /cat > "\$POLICY_FILE" <<EOF\n([\s\S]*?)\nEOF\n/.exec(read("DEPLOYMENT.md"))?.[1];
  if (text === undefined) throw new Error("DEPLOYMENT.md section 3 writes no store policy");
  return expand(text, vars);
}

/** The runtime stage's `ENV` instruction, as the image sets it. */
function imageEnv(): Record<string, string> {
  const line = /^ENV (.+)$/m.exec(read("Dockerfile").split("AS runtime")[1] ?? "")?.[1] ?? "";
  return Object.fromEntries(line.split(/\s+/).map((pair) => pair.split("=") as [string, string]));
}

/** Section 9's `$TOKEN`: the agent's Google ID token, set once the fake Google is up. */
let agentToken = "";

/** One HTTP request to the server with the Host header a client of `host` sends (and $TOKEN). */
function requestAs(
  port: number,
  host: string,
  method: string,
  path: string,
  body?: string,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: "127.0.0.1",
        port,
        method,
        path,
        headers: {
          host,
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          authorization: `Bearer ${agentToken}`,
        },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (d) => (text += d));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

describe("DEPLOYMENT.md rehearsed: production-only install, the documented environment, the smoke test", () => {
  let work: string;
  let app: string;
  let emulator: Child;
  // Memorystore's stand-in: a real Redis on loopback, with a password (over TLS in production).
  let redis: RunningRedis;
  // Google's stand-in: its keys on loopback (KORRAL_TEST_GOOGLE_CERTS_URL), tokens signed here.
  let google: FakeGoogle;
  let server: Spawned;
  let port = 0;
  let base = "";
  let serverEnv: NodeJS.ProcessEnv = {};
  let command: string[] = [];
  // What Google Cloud would answer to the document's command substitutions.
  const RUN_HOST = "korral-storelink-abc123-lm.a.run.app";
  const answers = { PROJECT_NUMBER: "123456789012", RUN_HOST, STORELINK_URL: "" };
  let deployed: ReturnType<typeof serviceEnvFromDeploymentMd>;

  beforeAll(async () => {
    expect(existsSync(join(root, "dist/http.js")), "npm test builds dist/ first").toBe(true);
    work = await mkdtemp(join(tmpdir(), "korral-runtime-"));
    app = join(work, "app");
    await mkdir(app);
    // Exactly what the runtime stage receives: the manifests, then dist/ from the build stage.
    await cp(join(root, "package.json"), join(app, "package.json"));
    await cp(join(root, "package-lock.json"), join(app, "package-lock.json"));
    await runOk(
      "npm",
      ["ci", "--omit=dev", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
      { cwd: app, env: { ...process.env, NODE_ENV: "production" }, timeoutMs: 240_000 },
    );
    await cp(join(root, "dist"), join(app, "dist"), { recursive: true });

    // The emulator stands in for StoreLink at STORELINK_URL.
    emulator = await startEmulatorProcess();
    answers.STORELINK_URL = emulator.url;
    redis = await startRedis();
    google = await startFakeGoogle();
    deployed = serviceEnvFromDeploymentMd(answers, { KORRAL_REDIS_URL: redis.url });
    // Section 9: `gcloud auth print-identity-token --impersonate-service-account="$AGENT_SA"
    // --audiences="$URL" --include-email`, $URL being the service's status.url.
    agentToken = await google.idToken(deployed.vars.AGENT_SA as string, `https://${RUN_HOST}`);
    // Each secret mounted as a file (the internal CA) lands under the work directory, and the
    // variables that name its path are pointed there.
    for (const path of deployed.mounts) {
      const file = join(work, "mounted", path);
      await mkdir(dirname(file), { recursive: true, mode: 0o755 });
      await cp(join(root, "test/fixtures/internal-ca.pem"), file);
      await chmod(file, 0o644);
      for (const [name, value] of Object.entries(deployed.env)) {
        if (value === path) deployed.env[name] = file;
      }
    }

    // The store keys: what Secret Manager would hold (store 128 has no secret, as in section 9).
    const keys: Record<string, string> = { ...SEED_ACCEPTED_KEYS };
    delete keys["128"];
    const keysFile = join(work, "keys.json");
    await writeFile(keysFile, JSON.stringify(keys));
    // The store policy section 3 publishes as the secret storelink-policy.
    const policyFile = join(work, "storelink-policy.json");
    await writeFile(policyFile, policyFromDeploymentMd(deployed.vars));
    const logDir = join(work, "log");
    await mkdir(logDir);
    if (dropPrivileges) {
      await chmod(work, 0o755); // mkdtemp makes it 0700; the code stays root-owned and read-only
      await chown(logDir, NOBODY, NOBODY);
    }

    port = await freePort();
    base = `http://127.0.0.1:${port}`;
    serverEnv = {
      PATH: process.env.PATH,
      ...imageEnv(),
      ...deployed.env,
      // Cloud Run sets PORT; tests listen on loopback.
      PORT: String(port),
      HOST: "127.0.0.1",
      // The one deviation: no Secret Manager here, so the same keys come from a file
      // (test/keys/ runs both providers through one contract suite).
      KORRAL_KEY_SOURCE: "file",
      KORRAL_KEYS_FILE: keysFile,
      // The same for the store policy: the secret's text, from a file.
      KORRAL_POLICY_FILE: policyFile,
      KORRAL_LOG_DIR: logDir,
      // The second deviation: Google's keys come from the stand-in (a test-only seam).
      KORRAL_TEST_GOOGLE_CERTS_URL: google.certsUrl,
    };
    delete serverEnv.KORRAL_POLICY_SECRET;
    command = dropPrivileges
      ? [SETPRIV, `--reuid=${NOBODY}`, `--regid=${NOBODY}`, "--clear-groups", process.execPath]
      : [process.execPath];
    const [file = "", ...prefix] = command;
    // As the image's CMD: node runs the entry directly, from the app directory.
    server = spawnProcess(file, [...prefix, "dist/http.js"], { cwd: app, env: serverEnv });
    await waitForHealthy(server, `${base}/healthz`);
  }, 300_000);

  afterAll(async () => {
    await server?.kill();
    await emulator?.stop();
    await redis?.kill();
    await google?.close();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it("the image is production and the deploy command sets STORELINK_URL and KORRAL_ALLOWED_HOSTS", () => {
    expect(imageEnv().NODE_ENV).toBe("production");
    expect(deployed.env.STORELINK_URL).toBe(emulator.url);
    expect(deployed.env.KORRAL_STORELINK).toBeUndefined();
    expect(deployed.env.KORRAL_ALLOWED_HOSTS?.split(",")).toEqual([
      "korral-storelink-123456789012.europe-central2.run.app",
      "*---korral-storelink-123456789012.europe-central2.run.app",
      RUN_HOST,
      `*---${RUN_HOST}`,
    ]);
  });

  it("section 5: the store policy is section 3's secret, and it names the agent", () => {
    expect(deployed.env.KORRAL_POLICY_SECRET).toBe("storelink-policy");
    expect(policyFromDeploymentMd(deployed.vars)).toContain(`"svc:${deployed.vars.AGENT_SA}"`);
  });

  it("section 5: node trusts the internal CA mounted from Secret Manager, without a warning", () => {
    expect(deployed.mounts).toEqual(["/etc/korral-ca/storelink-ca.pem"]);
    expect(serverEnv.NODE_EXTRA_CA_CERTS).toBe(
      join(work, "mounted", "/etc/korral-ca/storelink-ca.pem"),
    );
    // A path node cannot load is said on stderr at start ("Ignoring extra certs from ...").
    expect(server.stderr()).not.toMatch(/extra certs/i);
  });

  it("installed no development dependency", () => {
    const modules = join(work, "app/node_modules");
    for (const dev of ["typescript", "vitest", "tsx", "@biomejs/biome", "supertest"]) {
      expect(existsSync(join(modules, dev)), dev).toBe(false);
    }
    // The SDK v1 is a test client only: the service never loads it.
    expect(existsSync(join(modules, "@modelcontextprotocol/sdk"))).toBe(false);
  });

  it.runIf(dropPrivileges)(
    "the compile cache, warmed by the Dockerfile's own steps, is read by the runtime user",
    async () => {
      expect(existsSync(NODE_22), `${NODE_22} (npm ci --prefix conformance)`).toBe(true);
      // Node 22 where the runtime user may run it, and the script where the Dockerfile copies it.
      const node22 = join(work, "node22");
      await cp(NODE_22, node22);
      await chmod(node22, 0o755);
      await mkdir(join(app, "scripts"), { recursive: true });
      await cp(
        join(root, "scripts/warm-compile-cache.mjs"),
        join(app, "scripts/warm-compile-cache.mjs"),
      );
      const cache = join(app, ".compile-cache");
      // The Dockerfile's RUN as written, its user and its node made this machine's.
      const dockerfile = read("Dockerfile");
      const steps = warmRunOf(dockerfile)
        .replaceAll("/app/.compile-cache", cache)
        .replace("chown node:node", `chown ${NOBODY}:${NOBODY}`)
        .replace(
          "setpriv --reuid=node --regid=node --init-groups",
          `setpriv --reuid=${NOBODY} --regid=${NOBODY} --clear-groups`,
        )
        .replace(
          / node scripts\/warm-compile-cache\.mjs node /,
          ` ${node22} scripts/warm-compile-cache.mjs ${node22} `,
        );
      expect(steps).not.toMatch(/\bnode:node\b|--reuid=node| node scripts/);
      await runOk("sh", ["-c", steps], {
        cwd: app,
        env: { PATH: process.env.PATH, NODE_COMPILE_CACHE: cache },
        timeoutMs: 120_000,
      });

      // The deployment's start, as the runtime user, on the image's Node with its CMD's flags.
      const { flags, entry } = cmdOf(dockerfile);
      const run = spawnProcess(
        SETPRIV,
        [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, "--clear-groups", node22, ...flags, entry],
        {
          cwd: app,
          env: {
            ...serverEnv,
            PORT: String(await freePort()),
            NODE_COMPILE_CACHE: cache,
            NODE_DEBUG_NATIVE: "COMPILE_CACHE",
          },
        },
      );
      await listening(run);
      expect(await run.stop()).toBe(0);
      const use = cacheUse(`${run.stderr()}\n${run.stdout()}`, `file://${join(app, "dist")}/`);
      expect(use.read).toBeGreaterThan(20);
      expect(use.unusable).toEqual([]);
      expect(use.hits).toBe(use.read);
    },
    180_000,
  );

  it.runIf(dropPrivileges)("runs as a non-root user that cannot write its own code", async () => {
    const status = readFileSync(`/proc/${server.pid}/status`, "utf8");
    expect(status).toMatch(new RegExp(`^Uid:\\s+${NOBODY}\\s`, "m"));
    const asNobody = [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, "--clear-groups", "test"];
    const can = (flag: string, path: string) =>
      runProcess(SETPRIV, [...asNobody, flag, path]).then((ran) => ran.code === 0);
    expect(await can("-r", join(work, "app/dist/http.js"))).toBe(true);
    expect(await can("-w", join(work, "app/dist/http.js"))).toBe(false);
    expect(await can("-w", join(work, "app/node_modules"))).toBe(false);
  });

  it("section 4: the limits store comes from Secret Manager, and the service counts on it", () => {
    expect(deployed.env.KORRAL_REDIS_URL).toBe(redis.url);
    expect(deployed.env.KORRAL_LIMITS).toBeUndefined();
    expect(server.stderr()).toContain('"limits":"shared (redis)"');
    expect(server.stderr()).toContain("limits store connected");
    expect(server.stderr() + server.stdout()).not.toContain(redis.password);
  });

  /** The deployment as rehearsed without `variable`: its exit code and stderr lines. */
  async function startWithout(variable: string): Promise<{ code: number | null; lines: string[] }> {
    const env: NodeJS.ProcessEnv = { ...serverEnv, PORT: String(await freePort()) };
    delete env[variable];
    const [file = "", ...prefix] = command;
    // If it ever started, it would listen: killed after 15 s, failing below.
    const { code, stderr } = await runProcess(file, [...prefix, "dist/http.js"], {
      cwd: app,
      env,
      timeoutMs: 15_000,
    });
    return { code, lines: stderr.trimEnd().split("\n") };
  }

  it.each([
    ["KORRAL_REDIS_URL", "KORRAL_REDIS_URL: required on HTTP when NODE_ENV=production"],
    ["STORELINK_URL", "STORELINK_URL: required when NODE_ENV=production"],
    [
      "KORRAL_POLICY_FILE",
      "KORRAL_POLICY_FILE or KORRAL_POLICY_SECRET: required when KORRAL_AUTH is not none",
    ],
  ])(
    "the same deployment without %s refuses to start: one line, exit 2",
    async (variable, line) => {
      const { code, lines } = await startWithout(variable);
      expect(code).toBe(2);
      expect(lines).toEqual([expect.stringContaining(line)]);
    },
  );

  it("section 9: /health answers as the document shows, naming StoreLink's host", async () => {
    const doc = read("DEPLOYMENT.md");
    const shown = /curl -sS "\$URL\/health".*\n# (\{.*\})/.exec(doc)?.[1];
    expect(shown, "DEPLOYMENT.md shows the /health answer").toBeDefined();
    const expected = JSON.parse(shown as string) as Record<string, string>;
    const res = await requestAs(port, RUN_HOST, "GET", "/health");
    expect(res.status).toBe(200);
    const health = JSON.parse(res.text) as Record<string, string>;
    expect(Object.keys(health)).toEqual(Object.keys(expected));
    expect(health).toMatchObject({ status: expected.status, name: expected.name });
    expect(health.storelink).toBe(new URL(emulator.url).host);
    expect(health).toMatchObject({ limits: "ok", limits_store: "shared" });
    expect(server.stderr()).toContain(`"storelink":"${new URL(emulator.url).host}"`);
  });

  it("section 9: the documented tools/call reads live stock from StoreLink, per store", async () => {
    const doc = read("DEPLOYMENT.md");
    const body = /curl -sS -X POST "\$URL\/mcp"[\s\S]*?-d '(\{.*\})'/.exec(doc)?.[1];
    expect(body, "DEPLOYMENT.md's smoke test posts a tools/call").toBeDefined();
    const res = await requestAs(port, RUN_HOST, "POST", "/mcp", body);
    expect(res.status).toBe(200);
    const result = (JSON.parse(res.text) as { result: { structuredContent: { stores: object[] } } })
      .result.structuredContent;
    expect(result.stores).toEqual([
      expect.objectContaining({ status: "ok", store_id: "47", on_hand: 3, gap: 8 }),
      expect.objectContaining({
        status: "error",
        store_id: "128",
        error: expect.objectContaining({
          message: "No credentials for store 128. Ask Korral IT for access.",
        }),
      }),
    ]);
    // KORRAL_LOG_FILES=off on Cloud Run: the trace line goes to stdout for Cloud Logging (at the
    // end of the server's event-loop turn, so it may arrive just after the answer).
    for (let i = 0; i < 100 && !server.stdout().includes('"log_type":"trace"'); i++) {
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(server.stdout()).toContain('"log_type":"trace"');
    // The stores were judged by section 3's policy, read for this first call.
    expect(server.stderr()).toContain("store policy loaded (enforce)");
  });

  it("the allowlist serves every documented host name, tagged previews too, and nothing else", async () => {
    const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" });
    const statusFor = async (host: string) =>
      (await requestAs(port, host, "POST", "/mcp", body)).status;
    expect(await statusFor(RUN_HOST)).toBe(200);
    expect(await statusFor(`candidate---${RUN_HOST}`)).toBe(200);
    expect(await statusFor("korral-storelink-123456789012.europe-central2.run.app")).toBe(200);
    expect(
      await statusFor("candidate---korral-storelink-123456789012.europe-central2.run.app"),
    ).toBe(200);
    expect(await statusFor("evil.run.app")).toBe(403);
    expect(await statusFor(`candidate---evil-abc123-lm.a.run.app`)).toBe(403);
  });

  it("KORRAL_AUTH=google: the service verifies the token itself, X-Serverless-Authorization first", async () => {
    const list = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" });
    const post = (headers: Record<string, string>) =>
      fetch(`${base}/mcp`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          ...headers,
        },
        body: list,
      }).then((res) => res.status);
    const forged = `${agentToken.split(".").slice(0, 2).join(".")}.${"A".repeat(342)}`;
    const otherAudience = await google.idToken(
      "storelink-agent@korral-prod.iam.gserviceaccount.com",
      "https://another-service.a.run.app",
    );
    const unverified = await google.idToken("someone@korral.example", `https://${RUN_HOST}`, {
      email_verified: false,
    });
    expect(await post({})).toBe(401);
    expect(await post({ authorization: `Bearer ${forged}` })).toBe(401);
    expect(await post({ authorization: `Bearer ${otherAudience}` })).toBe(401);
    expect(await post({ authorization: `Bearer ${unverified}` })).toBe(401);
    expect(await post({ authorization: `Bearer ${agentToken}` })).toBe(200);
    // Cloud Run checks X-Serverless-Authorization in preference and passes Authorization on
    // unchecked: the service reads the same header it checked.
    expect(
      await post({
        "x-serverless-authorization": `Bearer ${agentToken}`,
        authorization: `Bearer ${forged}`,
      }),
    ).toBe(200);
    expect(
      await post({
        "x-serverless-authorization": `Bearer ${forged}`,
        authorization: `Bearer ${agentToken}`,
      }),
    ).toBe(401);
  });

  it("decodes a UTF-16 body (iconv-lite, kept out of the bundle, loads from node_modules)", async () => {
    const res = await fetch(`${base}/mcp`, {
      method: "POST",
      headers: {
        "content-type": "application/json; charset=utf-16le",
        accept: "application/json, text/event-stream",
        authorization: `Bearer ${agentToken}`,
      },
      body: Buffer.from(JSON.stringify({ jsonrpc: "2.0", id: 2, method: "ping" }), "utf16le"),
    });
    // Decoded by body-parser through iconv-lite; without it, this is a 500.
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ jsonrpc: "2.0", id: 2, result: {} });
  });

  it("stops cleanly on SIGTERM (what Cloud Run sends to PID 1)", async () => {
    server.child.kill("SIGTERM");
    expect(await server.exit).toBe(0);
    expect(server.stderr()).not.toMatch(/Cannot find (module|package)/);
  });
});
