import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
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
import { runSyncOk } from "../helpers/spawn.js";

/**
 * `rediss://` as Memorystore for Redis serves it (in-transit encryption, server authentication):
 * a server certificate issued by the instance's own CA (the `serverCaCerts` of `gcloud redis
 * instances describe`), naming the instance by its IP address (the `host` the URL connects to),
 * no DNS name; the CA trusted through NODE_EXTRA_CA_CERTS (as DEPLOYMENT.md mounts it), the AUTH
 * string in the URL. A throwaway CA made here with openssl. The client checks the chain and that
 * the certificate names the IP it connected to: another instance's certificate, from a trusted CA,
 * is refused too.
 */

function throwawayCa(dir: string, ip = "127.0.0.1"): { ca: string; cert: string; key: string } {
  const ca = join(dir, "ca.pem");
  const caKey = join(dir, "ca.key");
  const key = join(dir, `server-${ip}.key`);
  const csr = join(dir, `server-${ip}.csr`);
  const cert = join(dir, `server-${ip}.pem`);
  const ext = join(dir, `ext-${ip}.cnf`);
  writeFileSync(ext, `subjectAltName=IP:${ip}\nextendedKeyUsage=serverAuth\n`);
  const openssl = (...args: string[]) => runSyncOk("openssl", args, { stdio: "ignore" });
  if (!existsSync(ca)) {
    openssl("genrsa", "-out", caKey, "2048");
    openssl(
      "req",
      "-x509",
      "-new",
      "-key",
      caKey,
      "-subj",
      "/O=Google LLC/CN=Throwaway Memorystore Redis Server CA",
      "-days",
      "1",
      "-out",
      ca,
    );
  }
  openssl(
    "req",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-keyout",
    key,
    "-subj",
    `/O=Google LLC/CN=${ip}`,
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
  let elsewhere: RunningRedis;
  let trusted: Fleet;
  let untrusted: Fleet;
  let misnamed: Fleet;

  beforeAll(async () => {
    const pki = throwawayCa(dir);
    // Another instance's certificate, from the same trusted CA: it names another IP.
    const other = throwawayCa(dir, "10.0.0.3");
    [redis, elsewhere] = await Promise.all([startRedis({ tls: pki }), startRedis({ tls: other })]);
    [trusted, untrusted, misnamed] = await Promise.all([
      startFleet(1, { KORRAL_REDIS_URL: redis.url, NODE_EXTRA_CA_CERTS: pki.ca }),
      startFleet(1, { KORRAL_REDIS_URL: redis.url }),
      startFleet(1, { KORRAL_REDIS_URL: elsewhere.url, NODE_EXTRA_CA_CERTS: pki.ca }),
    ]);
  }, 90_000);
  afterAll(async () => {
    await Promise.all([trusted?.close(), untrusted?.close(), misnamed?.close()]);
    await Promise.all([redis?.kill(), elsewhere?.kill()]);
    rmSync(dir, { recursive: true, force: true });
  });

  it("with the CA trusted through NODE_EXTRA_CA_CERTS, orders count on the TLS store", async () => {
    expect(redis.url.startsWith("rediss://")).toBe(true);
    const replica = trusted.replicas[0] as Fleet["replicas"][number];
    expect(outcomeOf(await call(replica.url, "create_replenishment_order", order(1)))).toBe("ok");
    expect(replica.stderr()).toContain("limits store connected");
    const health = await (await fetch(new URL("/healthz", replica.url))).json();
    expect(health).toMatchObject({ limits: "ok", limits_store: "shared" });
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
    expect(line).toMatch(/"cause":"tls: \w+ [A-Z_]+"/);
    expect(replica.stderr()).toContain("limits store failed: its TLS certificate was refused");
    expect(replica.stderr()).not.toContain(TEST_REDIS_PASSWORD);
    expect(JSON.stringify(refused)).not.toContain(TEST_REDIS_PASSWORD);
    expect(untrusted.storelink.received).toBe(0);
    const health = await (await fetch(new URL("/healthz", replica.url))).json();
    expect(health).toMatchObject({ status: "ok", limits: "unavailable" });
  });

  it("a certificate from the trusted CA that names another IP is refused: the host is checked", async () => {
    const replica = misnamed.replicas[0] as Fleet["replicas"][number];
    const refused = await call(replica.url, "create_replenishment_order", order(3));
    expect(outcomeOf(refused)).toBe("limits_unavailable");
    await until(() => replica.stderr().includes("limits store unreachable"), "the outage line");
    expect(replica.stderr()).toMatch(/"cause":"tls: \w+ ERR_TLS_CERT_ALTNAME_INVALID"/);
    expect(replica.stderr()).not.toContain("limits store connected");
    expect(misnamed.storelink.received).toBe(0);
  });
});
