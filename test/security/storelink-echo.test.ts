import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inspect } from "node:util";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { ApiKey } from "../../src/keys/api-key.js";
import { createRecorder } from "../../src/logging/recorder.js";
import { HttpStoreLinkClient } from "../../src/storelink/http.js";
import { InMemoryStoreLink } from "../../src/storelink/memory.js";
import { filesUnder, findLeaks } from "../helpers/canary.js";
import { connect, MapKeyProvider } from "../helpers/harness.js";
import { captureOpsLog } from "../helpers/ops-log.js";
import { EVERY_PATH } from "../helpers/paths.js";

/**
 * Nothing StoreLink says reaches a result or a log unfiltered. A hostile (or merely careless)
 * StoreLink echoes the key it received in the error code, the error message and response
 * headers, for every endpoint and every status, and in bodies outside the contract. The keys are
 * canaries shaped like no known credential, so the log redaction cannot hide a leak: only not
 * copying StoreLink's text keeps them out of tool results, traces, audit lines, the ops log and
 * stderr.
 */

const STORES = ["47", "63", "102", "111", "128"];
/** Not `slk_...`: a key of any shape must stay out, not just one the redactor recognises. */
const KEYS = Object.fromEntries(
  STORES.map((id) => [id, `K${id}x${randomBytes(12).toString("hex")}CANARY`]),
);
const ALL = Object.values(KEYS);

type Scope = "every endpoint" | "store-scoped endpoints";
type CodeStyle = "echoed code" | "contract code, echoing message";
interface Mode {
  status: number;
  style: CodeStyle;
  scope: Scope;
}

const CONTRACT_CODE: Record<number, string> = {
  400: "invalid_request",
  401: "unauthorized",
  404: "unknown_store",
  409: "idempotency_conflict",
  422: "not_ranged",
  500: "internal",
  503: "unavailable",
};

/** Reads by idempotency key the echoing StoreLinks received (they echo there too). */
let keyReads = 0;

/** The echoing StoreLink: real data where the mode leaves an endpoint alone, echoes elsewhere. */
function echoingStoreLink(mode: () => Mode) {
  const real = new InMemoryStoreLink();
  return createServer(async (req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    const url = new URL(req.url ?? "/", "http://storelink");
    const received = req.headers["x-storelink-key"];
    const echoed = typeof received === "string" ? received : ALL.join(",");
    const { status, style, scope } = mode();
    const json = (code: number, body: unknown, headers: Record<string, string> = {}) => {
      res.writeHead(code, { "content-type": "application/json", ...headers });
      res.end(JSON.stringify(body));
    };
    const storeScoped = url.pathname.startsWith("/v1/stores/");
    if (url.pathname.includes("/order-requests/")) keyReads++;
    if (scope === "store-scoped endpoints" && !storeScoped) {
      // Directory and catalogue answer for real, so the calls go on to use a key.
      if (url.pathname === "/v1/stores") return json(200, { stores: await real.listStores() });
      if (url.pathname === "/v1/skus") {
        return json(200, { skus: await real.lookupSku(url.searchParams.get("q") ?? "") });
      }
      const sku = decodeURIComponent(url.pathname.slice("/v1/skus/".length));
      return real.getSku(sku).then(
        (item) => json(200, item),
        () => json(404, { error: { code: "unknown_sku", message: `no ${sku}; key ${echoed}` } }),
      );
    }
    const headers = {
      "x-storelink-echo": echoed,
      "www-authenticate": `StoreLinkKey realm="${echoed}"`,
    };
    const message = `rejected key ${echoed} (${Buffer.from(echoed).toString("base64")})`;
    if (status < 300) {
      // A success status with a body outside the contract, carrying the key.
      return json(status, { order_id: echoed, stores: echoed, skus: [echoed], message }, headers);
    }
    const code =
      style === "echoed code" ? `bad_key:${echoed}` : (CONTRACT_CODE[status] ?? "internal");
    json(status, { error: { code, message, key: echoed } }, headers);
  });
}

const MODES: Mode[] = [200, 201, 400, 401, 403, 404, 409, 418, 422, 429, 500, 502, 503].flatMap(
  (status) =>
    (["echoed code", "contract code, echoing message"] as const).flatMap((style) =>
      (["every endpoint", "store-scoped endpoints"] as const).map((scope) => ({
        status,
        style,
        scope,
      })),
    ),
);

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "korral-echo-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("a StoreLink echoing the key in codes, messages and headers", () => {
  it("no canary in any tool result, trace, audit line, ops log line or stderr", async () => {
    const ops = captureOpsLog();
    let stderr = "";
    const spy = vi.spyOn(process.stderr, "write").mockImplementation((chunk: unknown) => {
      stderr += String(chunk);
      return true;
    });
    const logDir = join(dir, "log");
    const outputs: unknown[] = [];
    /**
     * Every path against one echoing mode, through its own server. The modes run side by side:
     * a write whose answer may have landed asks StoreLink by key for up to ~2 s before it answers
     * UNCERTAIN, and one after another they would take minutes.
     */
    const drive = async (m: Mode, n: number) => {
      const storelinkServer = echoingStoreLink(() => m);
      await new Promise<void>((resolve) => storelinkServer.listen(0, "127.0.0.1", resolve));
      const { port } = storelinkServer.address() as AddressInfo;
      const recorder = createRecorder({ dir: join(logDir, String(n)) });
      try {
        const h = await connect({
          storelink: new HttpStoreLinkClient({
            baseUrl: `http://127.0.0.1:${port}`,
            timeoutMs: 2_000,
            // No directory cache: every mode must reach /v1/stores.
            storesTtlMs: 0,
          }),
          keys: new MapKeyProvider({ ...KEYS }),
          recorder,
        });
        try {
          for (const call of EVERY_PATH) {
            outputs.push(await h.call(call.name, call.arguments).catch((e: unknown) => String(e)));
          }
        } finally {
          await h.close();
        }
      } finally {
        await recorder.close();
        storelinkServer.closeAllConnections();
        await new Promise<void>((resolve) => storelinkServer.close(() => resolve()));
      }
    };
    try {
      await Promise.all(MODES.map((m, n) => drive(m, n)));
    } finally {
      spy.mockRestore();
      ops.restore();
    }

    const files = await filesUnder(logDir);
    const logs = files.map((f) => f.text).join("");
    // The hostile answers really were handled: unexpected ones logged, writes audited.
    expect(ops.text()).toContain("tool call failed unexpectedly");
    expect(logs).toContain(" UNCERTAIN ");
    expect(logs).toContain(" REJECTED ");
    // Lost answers were asked for by key, and those answers echoed as well.
    expect(keyReads).toBeGreaterThan(0);
    const found = [
      ...findLeaks("tool results", JSON.stringify(outputs), ALL),
      ...findLeaks("ops log", ops.text(), ALL),
      ...findLeaks("stderr", stderr, ALL),
      ...files.flatMap((f) => findLeaks(f.path, f.text, ALL)),
    ];
    expect(found).toEqual([]);
    // An unknown code is reported as this fixed word, and only that.
    expect(ops.text()).toContain("(unrecognised)");
  }, 60_000);

  it("the recipe: 400 {code: 'bad_key:<key>'} becomes a fixed message, the key nowhere in it", async () => {
    const server = echoingStoreLink(() => ({
      status: 400,
      style: "echoed code",
      scope: "every endpoint",
    }));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const client = new HttpStoreLinkClient({ baseUrl: `http://127.0.0.1:${port}` });
      const key = new ApiKey(KEYS["47"] as string);
      const error = await client.getStock("47", "8847291", key).then(
        () => new Error("expected a failure"),
        (e: Error) => e,
      );
      expect(error.message).toBe("StoreLink refused the request with HTTP 400 (unrecognised).");
      const text = `${error.message} ${error.stack} ${inspect(error, { depth: 10 })}`;
      expect(findLeaks("error", text, ALL)).toEqual([]);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
