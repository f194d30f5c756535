import { existsSync, readFileSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { type DelayedOrders, startDelayedEmulator, until } from "../helpers/delayed-emulator.js";
import { undoAfterEach } from "../helpers/fixtures.js";
import { HERO_REASON } from "../helpers/harness.js";
import { initialize, MCP_HEADERS, modernHeaders, modernMeta, toolCall } from "../helpers/rpc.js";
import { listening, type Spawned, spawnDist } from "../helpers/spawn.js";

/**
 * Every write that reached StoreLink leaves exactly one audit line, even when the process is told
 * to stop. The built processes over the StoreLink emulator (in this process), whose creates are
 * held: a test lets one finish once the server has said it is stopping, or never.
 */

const ORDER = { store_id: "47", sku: "8847291", quantity: 24, reason: HERO_REASON };
const { defer, workspace } = undoAfterEach();

async function setUp(delay: 0 | "held", entry: "http.js" | "stdio.js", graceMs: number) {
  const emulator = await startDelayedEmulator(delay);
  defer(() => emulator.close());
  const ws = await workspace();
  const env = {
    STORELINK_URL: emulator.baseUrl,
    STORELINK_TIMEOUT_MS: "10000",
    KORRAL_KEYS_FILE: ws.keysFile,
    KORRAL_LOG_DIR: ws.logDir,
    KORRAL_SHUTDOWN_GRACE_MS: String(graceMs),
    KORRAL_PRINCIPAL: "dana.buyer",
  };
  const server = spawnDist(entry, {
    ...env,
    ...(entry === "http.js" ? { HOST: "127.0.0.1", PORT: "0" } : {}),
  });
  defer(() => server.stop());
  const auditLines = (): string[] => {
    const file = join(ws.logDir, "audit.log");
    return existsSync(file) ? readFileSync(file, "utf8").split("\n").filter(Boolean) : [];
  };
  const traceLines = (): string[] => {
    const file = join(ws.logDir, "trace.jsonl");
    return existsSync(file) ? readFileSync(file, "utf8").split("\n").filter(Boolean) : [];
  };
  return { storelink: emulator.storelink, server, auditLines, traceLines, env };
}

async function portOf(server: Spawned): Promise<number> {
  return (await listening(server, 10_000)).port;
}

/** POSTs the create (or `body`) and returns the request, so the test can drop its socket. */
function postCreate(
  port: number,
  body: unknown = toolCall(42, "create_replenishment_order", ORDER),
  headers: Record<string, string> = MCP_HEADERS,
) {
  const req = request({ host: "127.0.0.1", port, path: "/mcp", method: "POST", headers });
  req.on("error", () => {});
  req.end(JSON.stringify(body));
  return req;
}

const writeReached = (storelink: DelayedOrders) => () => storelink.received === 1;

/** Waits for the server's own word that it is stopping (HTTP and stdio both say it once). */
const stopping = (server: Spawned) =>
  until(() => /shutting down|"msg":"stopping|stopping: /.test(server.stderr()), "the stop");

/** Lets the held write finish once the server is stopping: the stop must wait for it. */
async function finishOnceStopping(server: Spawned, storelink: DelayedOrders): Promise<void> {
  await stopping(server);
  storelink.release();
}

/**
 * The client drops its socket once the write is at StoreLink, then SIGTERM: the server exits 0
 * with the one order created and one audit line, which is returned.
 */
async function leaveMidWriteThenStop(
  { storelink, server, auditLines }: Awaited<ReturnType<typeof setUp>>,
  req: { destroy(): void },
): Promise<string | undefined> {
  await until(writeReached(storelink), "the create to reach StoreLink");
  req.destroy();
  server.child.kill("SIGTERM");
  await finishOnceStopping(server, storelink);

  expect(await server.exit).toBe(0);
  expect(storelink.created).toEqual(["RPL-47-001"]);
  const lines = auditLines();
  expect(lines).toHaveLength(1);
  return lines[0];
}

describe("SIGTERM over HTTP", () => {
  it("waits for a write whose client dropped its socket, audits it CREATED, exits 0", async () => {
    const run = await setUp("held", "http.js", 6_000);
    const line = await leaveMidWriteThenStop(run, postCreate(await portOf(run.server)));
    expect(line).toContain("CREATED");
    expect(line).toContain("RPL-47-001");
  });

  it("audits a write StoreLink has not answered by the end of the grace UNCERTAIN, then exits 1", async () => {
    const { storelink, server, auditLines } = await setUp("held", "http.js", 500);
    postCreate(await portOf(server));
    await until(writeReached(storelink), "the create to reach StoreLink");
    server.child.kill("SIGTERM");

    expect(await server.exit).toBe(1);
    const lines = auditLines();
    expect(lines).toHaveLength(1);
    const line = lines[0] ?? "";
    expect(line).toContain("UNCERTAIN");
    for (const fact of ["47", "8847291", "24", "Buyer approved 24", "req_"]) {
      expect(line).toContain(fact);
    }
    expect(line).toContain("the process stopped before StoreLink answered");
    expect(server.stderr()).toContain("audited UNCERTAIN");
  });
});

describe("end of stdin", () => {
  const frames = (...messages: object[]) => messages.map((m) => `${JSON.stringify(m)}\n`).join("");

  it("answers the piped create and audits it CREATED before exiting 0", async () => {
    const { storelink, server, auditLines, traceLines } = await setUp("held", "stdio.js", 6_000);
    server.child.stdin?.end(
      frames(initialize(1), toolCall(2, "create_replenishment_order", ORDER)),
    );
    await until(writeReached(storelink), "the create to reach StoreLink");
    await finishOnceStopping(server, storelink);

    expect(await server.exit).toBe(0);
    expect(storelink.created).toEqual(["RPL-47-001"]);
    const answers = server
      .stdout()
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line));
    expect(answers.map((a) => a.id).sort()).toEqual([1, 2]);
    expect(answers.find((a) => a.id === 2).result.structuredContent.order_id).toBe("RPL-47-001");
    const lines = auditLines();
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain("CREATED");
    expect(traceLines()).toHaveLength(1);
  });

  it("audits a write still running at the end of the grace UNCERTAIN, then exits 1", async () => {
    const { storelink, server, auditLines, traceLines } = await setUp("held", "stdio.js", 500);
    server.child.stdin?.write(frames(toolCall(2, "create_replenishment_order", ORDER)));
    await until(writeReached(storelink), "the create to reach StoreLink");
    server.child.stdin?.end();

    expect(await server.exit).toBe(1);
    const lines = auditLines();
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain("UNCERTAIN");
    expect(lines[0]).toContain("the process stopped before StoreLink answered");
    // Its trace line too, joined by request id as every audit line is.
    const requestId = /req=(req_\w+)/.exec(lines[0] ?? "")?.[1];
    expect(requestId).toBeDefined();
    expect(traceLines()).toEqual([expect.stringContaining(`"request_id":"${requestId}"`)]);
  });

  it("SIGTERM on stdio waits for the running write too", async () => {
    const { storelink, server, auditLines } = await setUp("held", "stdio.js", 6_000);
    server.child.stdin?.write(frames(toolCall(2, "create_replenishment_order", ORDER)));
    await until(writeReached(storelink), "the create to reach StoreLink");
    server.child.kill("SIGTERM");
    await finishOnceStopping(server, storelink);

    expect(await server.exit).toBe(0);
    expect(auditLines()).toHaveLength(1);
    expect(auditLines()[0]).toContain("CREATED");
    expect(JSON.parse(server.stdout().trim()).result.structuredContent.order_id).toBe("RPL-47-001");
  });

  it("a client that closed stdout too: the write still finishes and is audited, exit 0", async () => {
    const { storelink, server, auditLines } = await setUp("held", "stdio.js", 6_000);
    server.child.stdin?.write(frames(toolCall(2, "create_replenishment_order", ORDER)));
    await until(writeReached(storelink), "the create to reach StoreLink");
    // The answer will meet a closed pipe (EPIPE), which must not kill the process mid-write.
    server.child.stdout?.destroy();
    server.child.stdin?.end();
    await finishOnceStopping(server, storelink);

    expect(await server.exit).toBe(0);
    expect(auditLines()).toHaveLength(1);
    expect(auditLines()[0]).toContain("CREATED");
    expect(server.stderr()).toContain("stdout is closed");
  });

  it("a confirmation asked of a client whose stdin then ended counts as not given: REJECTED, exit 0", async () => {
    const { storelink, server, auditLines } = await setUp(0, "stdio.js", 6_000);
    const init = initialize(1);
    server.child.stdin?.write(
      frames(
        { ...init, params: { ...init.params, capabilities: { elicitation: { form: {} } } } },
        { jsonrpc: "2.0", method: "notifications/initialized" },
        toolCall(2, "create_replenishment_order", ORDER),
      ),
    );
    await until(() => server.stdout().includes("elicitation/create"), "the confirmation request");
    server.child.stdin?.end();

    // Without an answer possible, the call must not wait out the grace (exit 1).
    expect(await server.exit).toBe(0);
    expect(storelink.received).toBe(0);
    const lines = auditLines();
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain("REJECTED");
    expect(lines[0]).toContain("did not confirm");
  });

  it("SIGTERM with a confirmation pending and half a line read: REJECTED, no parse error, exit 0", async () => {
    const { storelink, server, auditLines } = await setUp(0, "stdio.js", 6_000);
    const init = initialize(1);
    server.child.stdin?.write(
      frames(
        { ...init, params: { ...init.params, capabilities: { elicitation: { form: {} } } } },
        toolCall(2, "create_replenishment_order", ORDER),
      ),
    );
    await until(() => server.stdout().includes("elicitation/create"), "the confirmation request");
    server.child.stdin?.write('{"jsonrpc":"2.0","id":7,');
    await new Promise((resolve) => setTimeout(resolve, 100));
    server.child.kill("SIGTERM");

    expect(await server.exit).toBe(0);
    expect(storelink.received).toBe(0);
    expect(auditLines()).toEqual([expect.stringContaining("REJECTED")]);
    expect(server.stdout()).not.toContain("-32700");
  });
});

describe("kill -9 while the order is at StoreLink", () => {
  it.each(["stdio.js", "http.js"] as const)(
    "%s: no line at the kill; the next start audits it UNCERTAIN once, and its reconciler RESOLVED once the order landed",
    async (entry) => {
      const { storelink, server, auditLines, env } = await setUp("held", entry, 6_000);
      if (entry === "http.js") postCreate(await portOf(server));
      else {
        server.child.stdin?.write(
          `${JSON.stringify(toolCall(2, "create_replenishment_order", ORDER))}\n`,
        );
      }
      await until(writeReached(storelink), "the create to reach StoreLink");
      server.child.kill("SIGKILL");
      await server.exit;
      expect(auditLines()).toEqual([]);
      // StoreLink finishes the create its writer never heard back from: one order landed.
      storelink.release();
      await until(() => storelink.created.length === 1, "the held create to land");

      // The next server on this log directory (a restart, or the desktop's next session).
      // Run by someone else: who ordered must come from the killed write's own intent.
      const next = spawnDist("stdio.js", { ...env, KORRAL_PRINCIPAL: "ops.oncall" });
      defer(() => next.stop());
      const resolved = () => auditLines().filter((l) => / RESOLVED /.test(l));
      await until(() => resolved().length > 0, "the reconciler's RESOLVED line");
      next.child.stdin?.end();
      expect(await next.exit).toBe(0);
      const lines = auditLines();
      const uncertain = lines.filter((l) => / UNCERTAIN /.test(l));
      expect(uncertain).toHaveLength(1);
      expect(uncertain[0]).toMatch(
        / UNCERTAIN - store=47 sku=8847291 qty=24 req=req_\w+ by=local:dana\.buyer key=korral-[0-9a-f-]{36} detail="the server was stopped \(killed\)/,
      );
      expect(next.stderr()).toContain("audited UNCERTAIN");
      // The reconciler of that start asked StoreLink by the key: the same attempt, CREATED.
      const req = uncertain[0]?.match(/ req=(req_\w+) /)?.[1];
      const key = uncertain[0]?.match(/ key=(\S+) /)?.[1];
      expect(resolved()).toHaveLength(1);
      expect(resolved()[0]).toMatch(
        new RegExp(
          ` RESOLVED RPL-47-001 store=47 sku=8847291 qty=24 req=${req} by=local:dana\\.buyer key=${key} .*outcome=CREATED`,
        ),
      );
      // The recovered line first, then its resolution; nothing else.
      expect(lines).toEqual([uncertain[0], resolved()[0]]);

      // A third start finds nothing left to recover or resolve.
      const third = spawnDist("stdio.js", env);
      defer(() => third.stop());
      third.child.stdin?.end();
      expect(await third.exit).toBe(0);
      expect(auditLines()).toEqual(lines);
      expect(storelink.created).toEqual(["RPL-47-001"]);
    },
  );
});

describe("more signals during the drain", () => {
  it.each([
    ["http.js", ["SIGTERM", "SIGTERM", "SIGINT", "SIGHUP"]],
    ["http.js", ["SIGHUP"]],
    ["stdio.js", ["SIGTERM", "SIGINT", "SIGTERM", "SIGHUP"]],
    ["stdio.js", ["SIGHUP", "SIGHUP"]],
  ] as const)(
    "%s, %j: the running write still finishes and is audited CREATED",
    async (entry, signals) => {
      const { storelink, server, auditLines } = await setUp("held", entry, 6_000);
      if (entry === "http.js") postCreate(await portOf(server));
      else {
        server.child.stdin?.write(
          `${JSON.stringify(toolCall(2, "create_replenishment_order", ORDER))}\n`,
        );
      }
      await until(writeReached(storelink), "the create to reach StoreLink");
      server.child.kill(signals[0]);
      await stopping(server);
      // The rest arrive during the drain.
      for (const signal of signals.slice(1)) server.child.kill(signal);
      storelink.release();
      expect(await server.exit).toBe(0);
      expect(storelink.created).toEqual(["RPL-47-001"]);
      const lines = auditLines();
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/ CREATED RPL-47-001 /);
    },
  );
});

describe("a 2026-07-28 request cancelled over stdio", () => {
  it("is not answered, its write still finishes and is audited, and stdin's end does not wait for it", async () => {
    const { storelink, server, auditLines } = await setUp("held", "stdio.js", 6_000);
    const meta = modernMeta({}, "raw");
    const call = toolCall(5, "create_replenishment_order", ORDER);
    server.child.stdin?.write(
      `${JSON.stringify({ ...call, params: { ...call.params, _meta: meta } })}\n`,
    );
    await until(writeReached(storelink), "the create to reach StoreLink");
    const cancel = {
      jsonrpc: "2.0",
      method: "notifications/cancelled",
      params: { requestId: 5, reason: "the buyer changed their mind", _meta: meta },
    };
    server.child.stdin?.end(`${JSON.stringify(cancel)}\n`);
    await finishOnceStopping(server, storelink);
    // Exit 0: the stop did not wait for an answer that never comes (it would run into the grace
    // period, and a stop past the grace exits 1).
    expect(await server.exit).toBe(0);
    expect(server.stdout()).not.toContain('"id":5');
    expect(storelink.created).toEqual(["RPL-47-001"]);
    const lines = auditLines();
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/ CREATED RPL-47-001 .*confirmed=agent/);
  });
});

describe("a 2026-07-28 client that leaves mid-write over HTTP", () => {
  it("round 2's write still finishes and is audited once, CREATED confirmed=buyer, through SIGTERM", async () => {
    const run = await setUp("held", "http.js", 6_000);
    const port = await portOf(run.server);
    const meta = modernMeta({ elicitation: { form: {} } }, "raw");
    const headers = modernHeaders("tools/call", "create_replenishment_order");
    const call = toolCall(9, "create_replenishment_order", ORDER);
    const round1 = await fetch(`http://127.0.0.1:${port}/mcp`, {
      method: "POST",
      headers,
      body: JSON.stringify({ ...call, params: { ...call.params, _meta: meta } }),
    }).then((r) => r.json() as Promise<{ result: { resultType: string; requestState: string } }>);
    expect(round1.result.resultType).toBe("input_required");
    const req = postCreate(
      port,
      {
        ...call,
        params: {
          ...call.params,
          _meta: meta,
          requestState: round1.result.requestState,
          inputResponses: { confirm: { action: "accept", content: { confirm: true } } },
        },
      },
      headers,
    );
    expect(await leaveMidWriteThenStop(run, req)).toMatch(/ CREATED RPL-47-001 .*confirmed=buyer/);
  });
});
