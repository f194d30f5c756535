import { once } from "node:events";
import { createServer, type Server, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { until } from "../helpers/delayed-emulator.js";
import { listening, spawnDist } from "../helpers/spawn.js";

/**
 * No text a Redis server (or a proxy in front of it) sends back reaches a log: only the error's
 * class and code (`ErrorReply ERR`, `ErrorReply WRONGPASS`). The fake here quotes the command it
 * refuses, AUTH's password included, cut short as some proxies do: an exact-match redaction of
 * the password would miss it.
 */

const PASSWORD = Array.from(
  { length: 160 },
  (_, i) => "QXZJKqxzjk~^"[(i * 7 + Math.floor(i / 5)) % 12],
).join("");

/** Every 6-character window of the password: none may appear in a log. */
const WINDOWS = Array.from({ length: PASSWORD.length - 5 }, (_, i) => PASSWORD.slice(i, i + 6));

/** A RESP server that answers every command with an error quoting its arguments (107 chars). */
async function quotingRedis(prefix: string): Promise<{ server: Server; port: number }> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => {});
    socket.on("data", (chunk) => {
      // The bulk strings of the request, in order; enough RESP for a client's handshake.
      const args = chunk
        .toString("latin1")
        .split("\r\n")
        .filter((_, i, all) => i > 0 && all[i - 1]?.startsWith("$"));
      const quoted = args.join(" ").slice(0, 107);
      socket.write(`-${prefix} '${quoted}'\r\n`);
    });
  });
  server.on("close", () => {
    for (const socket of sockets) socket.destroy();
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return { server, port: (server.address() as { port: number }).port };
}

describe("a Redis that quotes the password in its errors", () => {
  const servers: Server[] = [];
  afterAll(() => {
    for (const server of servers) server.close();
  });
  let ports: { err: number; wrongpass: number };
  beforeAll(async () => {
    const err = await quotingRedis("ERR invalid password");
    const wrongpass = await quotingRedis("WRONGPASS invalid username-password pair");
    servers.push(err.server, wrongpass.server);
    ports = { err: err.port, wrongpass: wrongpass.port };
  });

  it.each([
    ["ERR", "err", /"cause":"reply: \w+ ERR"/],
    ["WRONGPASS", "wrongpass", /"cause":"auth: \w+ WRONGPASS"/],
  ] as const)(
    "%s: the ops log names the class and code, and no 6 characters of the password",
    async (_code, which, cause) => {
      const run = spawnDist("http.js", {
        PORT: "0",
        HOST: "127.0.0.1",
        KORRAL_LOG_FILES: "off",
        KORRAL_REDIS_ALERT_AFTER_MS: "200",
        KORRAL_REDIS_URL: `redis://:${encodeURIComponent(PASSWORD)}@127.0.0.1:${ports[which]}`,
      });
      try {
        await listening(run, 30_000);
        await until(
          () => run.stderr().includes("limits store unreachable"),
          "the outage line",
          30_000,
        );
        const log = run.stderr() + run.stdout();
        expect(log).toMatch(cause);
        const leaked = WINDOWS.filter((window) => log.includes(window));
        expect(leaked).toEqual([]);
        expect(log).not.toContain("invalid password");
      } finally {
        await run.stop();
      }
    },
  );
});
