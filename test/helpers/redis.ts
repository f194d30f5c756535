import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { connect, createServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connectRedisLimits, type RedisLimits } from "../../src/limits/redis.js";
import { until } from "./delayed-emulator.js";
import { freePort, runSync, spawnProcess } from "./spawn.js";

/**
 * A real Redis for the tests: Debian's `redis-server`, on a loopback port, with a password and
 * no persistence, stopped by the test (started as every test process is: test/helpers/spawn.ts).
 */

const INSTALL = "apt-get install redis-server";

function hasRedisServer(): boolean {
  return runSync("redis-server", ["--version"], { stdio: "ignore" }).status === 0;
}

/**
 * Whether the Redis tests run: where `redis-server` is missing they are skipped with one line
 * saying how to install it, except under CI (`CI=true`), where a missing server is a failure.
 */
export const REDIS_AVAILABLE = ((): boolean => {
  if (hasRedisServer()) return true;
  if (process.env.CI === "true") {
    throw new Error(`redis-server is missing; CI must have it (${INSTALL})`);
  }
  console.warn(`Redis tests skipped: redis-server is not installed (${INSTALL})`);
  return false;
})();

export interface RedisOptions {
  password?: string;
  /** Reuse this port (a Redis restarted on the same address). */
  port?: number;
  /** Persist every write (AOF, fsync always) in `dir`, so a restart on the same dir keeps them. */
  persistIn?: string;
  /** `maxmemory-policy` (redis-server's own default is noeviction, as DEPLOYMENT.md sets). */
  maxmemoryPolicy?: string;
  /** TLS on the port, with these PEM files; the plain port is then off. */
  tls?: { cert: string; key: string; ca: string };
  /** More `redis-server` arguments (a `--maxmemory`, say), after the others. */
  args?: string[];
  /** How long it may take to listen before the start fails (and it is killed). */
  startWithinMs?: number;
}

export interface RunningRedis {
  port: number;
  password: string;
  /** `redis://:password@127.0.0.1:port` (or `rediss://` with TLS). */
  url: string;
  /** Kills it at once (SIGKILL): the connection drops mid-whatever. */
  kill(): Promise<void>;
  /** Its log, for a failing test. */
  log(): string;
}

export const TEST_REDIS_PASSWORD = "redis-test-password-c4n4ry-7781";

export async function startRedis(options: RedisOptions = {}): Promise<RunningRedis> {
  const port = options.port ?? (await freePort());
  const password = options.password ?? TEST_REDIS_PASSWORD;
  const dir = options.persistIn ?? mkdtempSync(join(tmpdir(), "korral-redis-"));
  const args = [
    "--bind",
    "127.0.0.1",
    "--save",
    "",
    "--appendonly",
    options.persistIn ? "yes" : "no",
    "--appendfsync",
    "always",
    "--dir",
    dir,
    "--requirepass",
    password,
    ...(options.maxmemoryPolicy ? ["--maxmemory-policy", options.maxmemoryPolicy] : []),
    ...(options.tls
      ? [
          "--port",
          "0",
          "--tls-port",
          String(port),
          "--tls-cert-file",
          options.tls.cert,
          "--tls-key-file",
          options.tls.key,
          "--tls-ca-cert-file",
          options.tls.ca,
          "--tls-auth-clients",
          "no",
        ]
      : ["--port", String(port)]),
    ...(options.args ?? []),
  ];
  const server = spawnProcess("redis-server", args, { stdin: "ignore" });
  const log = () => server.stdout() + server.stderr();
  const removeDir = () => {
    if (!options.persistIn) rmSync(dir, { recursive: true, force: true });
  };
  try {
    // Its own line first: a port some other server holds is not this Redis listening (it
    // exits, failing to bind).
    await server.ready(/Ready to accept connections/, options.startWithinMs ?? 10_000);
    await server.until(
      () => portOpen(port),
      `listening on ${port}`,
      options.startWithinMs ?? 10_000,
    );
  } catch (error) {
    removeDir();
    throw error;
  }
  const scheme = options.tls ? "rediss" : "redis";
  return {
    port,
    password,
    url: `${scheme}://:${encodeURIComponent(password)}@127.0.0.1:${port}`,
    log,
    async kill() {
      await server.kill();
      removeDir();
    },
  };
}

function portOpen(port: number): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const socket = connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

/** This process's limits store on `url`, once connected and checked (close it after the test). */
export async function connectedLimits(url: string, timeoutMs = 2_000): Promise<RedisLimits> {
  const limits = connectRedisLimits({ url, timeoutMs });
  await until(() => limits.health.state === "ok", "the limits store to connect");
  return limits;
}

export interface LossyProxy {
  port: number;
  /** Answers dropped so far (each with its connection). */
  dropped(): number;
  close(): Promise<void>;
}

/**
 * A TCP proxy in front of Redis that loses answers: a chunk from Redis is, with probability
 * `dropRate` (from the seeded `random`), not delivered, and both connections are cut. The
 * command it answered has run on Redis; the client only sees its connection drop.
 */
export async function lossyProxy(
  targetPort: number,
  dropRate: number,
  random: () => number,
): Promise<LossyProxy> {
  let dropped = 0;
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(targetPort, "127.0.0.1");
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
      socket.on("error", () => {});
    }
    const cut = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("data", (chunk) => upstream.write(chunk));
    upstream.on("data", (chunk) => {
      if (random() < dropRate) {
        dropped++;
        cut();
      } else client.write(chunk);
    });
    client.on("close", cut);
    upstream.on("close", cut);
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return {
    port: (server.address() as { port: number }).port,
    dropped: () => dropped,
    async close() {
      for (const socket of sockets) socket.destroy();
      server.close();
      await once(server, "close");
    },
  };
}
