import { once } from "node:events";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HttpStoreLinkClient } from "../../src/storelink/http.js";
import { SEED_ACCEPTED_KEYS } from "../../src/storelink/seed.js";
import { connect, errorOf, HERO_REASON } from "../helpers/harness.js";
import { captureOpsLog } from "../helpers/ops-log.js";
import { freePort, runSyncOk } from "../helpers/spawn.js";

/**
 * What an operator meets first: StoreLink's connection failing for a reason of its own (a
 * certificate Node does not trust, as without the internal CA; a refused port). The ops log names
 * the cause once, never a key; a write refused by the TLS handshake was never sent, so it is
 * `storelink_unavailable`, audited REJECTED, not an order of unknown outcome.
 */

const ORDER = { store_id: "47", sku: "8847291", quantity: 24, reason: HERO_REASON };
const dir = mkdtempSync(join(tmpdir(), "korral-tls-storelink-"));
let url = "";
let requests = 0;
const server = (() => {
  runSyncOk(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-subj",
      "/CN=127.0.0.1",
      "-addext",
      "subjectAltName=IP:127.0.0.1",
      "-days",
      "1",
      "-keyout",
      join(dir, "key.pem"),
      "-out",
      join(dir, "cert.pem"),
    ],
    { stdio: "ignore" },
  );
  return createServer(
    { key: readFileSync(join(dir, "key.pem")), cert: readFileSync(join(dir, "cert.pem")) },
    (_req, res) => {
      requests++;
      res.writeHead(500).end();
    },
  );
})();

beforeAll(async () => {
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => {
  server.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("StoreLink's connection failing for a cause of its own", () => {
  it("a certificate Node does not trust: reads unavailable, the write REJECTED unsent, the cause said once", async () => {
    const log = captureOpsLog();
    const h = await connect({
      storelink: new HttpStoreLinkClient({ baseUrl: url, timeoutMs: 5_000 }),
    });
    try {
      for (let i = 0; i < 3; i++) {
        const read = await h.call("get_stock_position", { sku: "8847291", store_ids: ["47"] });
        expect(errorOf(read).type).toBe("storelink_unavailable");
      }
      const write = await h.call("create_replenishment_order", ORDER);
      expect(errorOf(write).type).toBe("storelink_unavailable");
      expect(h.recorder.audits.map((a) => a.outcome)).toEqual(["REJECTED"]);
      expect(requests).toBe(0);
      const said = log
        .lines()
        .filter((l) => String(l.msg).startsWith("StoreLink could not be reached"));
      expect(said).toHaveLength(1);
      expect(String(said[0]?.cause)).toMatch(/CERT|SIGNED/);
      for (const key of Object.values(SEED_ACCEPTED_KEYS)) expect(log.text()).not.toContain(key);
    } finally {
      await h.close();
      log.restore();
    }
  });

  it("a refused port names ECONNREFUSED once", async () => {
    const log = captureOpsLog();
    const closed = `http://127.0.0.1:${await freePort()}`;
    const h = await connect({
      storelink: new HttpStoreLinkClient({ baseUrl: closed, timeoutMs: 5_000 }),
    });
    try {
      for (let i = 0; i < 3; i++)
        await h.call("get_stock_position", { sku: "8847291", store_ids: ["47"] });
      const said = log
        .lines()
        .filter((l) => String(l.msg).startsWith("StoreLink could not be reached"));
      expect(said.map((l) => l.cause)).toEqual(["ECONNREFUSED"]);
    } finally {
      await h.close();
      log.restore();
    }
  });
});
