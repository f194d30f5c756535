import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { until } from "../helpers/delayed-emulator.js";
import { call, type Fleet, outcomeOf, startFleet } from "../helpers/fleet.js";
import { HERO_REASON } from "../helpers/harness.js";
import {
  REDIS_AVAILABLE,
  type RunningRedis,
  startRedis,
  TEST_REDIS_PASSWORD,
} from "../helpers/redis.js";

/**
 * `rediss://` as Memorystore serves it: a server certificate from a private CA, trusted through
 * NODE_EXTRA_CA_CERTS (as DEPLOYMENT.md mounts it), the AUTH string in the URL. A throwaway CA
 * made here with openssl.
 */

function throwawayCa(dir: string): { ca: string; cert: string; key: string } {
  const ca = join(dir, "ca.pem");
  const caKey = join(dir, "ca.key");
  const key = join(dir, "server.key");
  const csr = join(dir, "server.csr");
  const cert = join(dir, "server.pem");
  const ext = join(dir, "ext.cnf");
  writeFileSync(ext, "subjectAltName=IP:127.0.0.1\n");
  const openssl = (...args: string[]) => execFileSync("openssl", args, { stdio: "ignore" });
  openssl("genrsa", "-out", caKey, "2048");
  openssl(
    "req",
    "-x509",
    "-new",
    "-key",
    caKey,
    "-subj",
    "/CN=Test Limits CA",
    "-days",
    "1",
    "-out",
    ca,
  );
  openssl(
    "req",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-keyout",
    key,
    "-subj",
    "/CN=127.0.0.1",
    "-out",
    csr,
  );
  openssl(
    "x509",
    "-req",
    "-in",
    csr,
    "-CA",
    ca,
    "-CAkey",
    caKey,
    "-CAcreateserial",
    "-days",
    "1",
    "-extfile",
    ext,
    "-out",
    cert,
  );
  return { ca, cert, key };
}

const order = (quantity: number) => ({
  store_id: "47",
  sku: "8847291",
  quantity,
  reason: HERO_REASON,
});

describe.runIf(REDIS_AVAILABLE)("the limits store over TLS", () => {
  const dir = mkdtempSync(join(tmpdir(), "korral-redis-tls-"));
  let redis: RunningRedis;
  let trusted: Fleet;
  let untrusted: Fleet;

  beforeAll(async () => {
    const pki = throwawayCa(dir);
    redis = await startRedis({ tls: pki });
    [trusted, untrusted] = await Promise.all([
      startFleet(1, { KORRAL_REDIS_URL: redis.url, NODE_EXTRA_CA_CERTS: pki.ca }),
      startFleet(1, { KORRAL_REDIS_URL: redis.url }),
    ]);
  }, 60_000);
  afterAll(async () => {
    await Promise.all([trusted?.close(), untrusted?.close()]);
    await redis?.kill();
    rmSync(dir, { recursive: true, force: true });
  });

  it("with the CA trusted through NODE_EXTRA_CA_CERTS, orders count on the TLS store", async () => {
    expect(redis.url.startsWith("rediss://")).toBe(true);
    const replica = trusted.replicas[0] as Fleet["replicas"][number];
    expect(outcomeOf(await call(replica.url, "create_replenishment_order", order(1)))).toBe("ok");
    expect(replica.stderr()).toContain("limits store connected");
  });

  it("without the CA the certificate is refused: writes fail closed, and the cause is logged without the password", async () => {
    const replica = untrusted.replicas[0] as Fleet["replicas"][number];
    const refused = await call(replica.url, "create_replenishment_order", order(2));
    expect(outcomeOf(refused)).toBe("limits_unavailable");
    expect(outcomeOf(await call(replica.url, "lookup_sku", { query: "butter" }))).toBe("ok");
    await until(() => replica.stderr().includes("limits store unreachable"), "the outage line");
    const line = replica
      .stderr()
      .split("\n")
      .find((l) => l.includes("limits store unreachable"));
    expect(line).toMatch(/certificate|CERT|self.signed|issuer/i);
    expect(replica.stderr()).not.toContain(TEST_REDIS_PASSWORD);
    expect(JSON.stringify(refused)).not.toContain(TEST_REDIS_PASSWORD);
    expect(untrusted.storelink.received).toBe(0);
  });
});
