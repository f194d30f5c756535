import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { POLICY_RETRY_MS, policySourceFor } from "../../src/policy/policy-source.js";
import { POLICY_MAX_BYTES, type StorePolicy } from "../../src/policy/store-policy.js";
import { FakeSecretManager, grpcError } from "../helpers/fake-secret-manager.js";
import { captureOpsLog } from "../helpers/ops-log.js";

/**
 * The policy from Secret Manager (KORRAL_POLICY_SECRET), through the keys' client seam with the
 * fake client: the secret the configuration names, read within the cache; every fault of the
 * service or the payload an unavailable policy (fail closed) with a secret-free category, the
 * gRPC text never in a message or the ops log; a client that cannot start, the same.
 */

const NAME = "projects/korral-prod/secrets/storelink-policy/versions/latest";
const GOOD = JSON.stringify({
  version: 1,
  mode: "shadow",
  groups: { dairy: { order: { stores: ["47"] } } },
  principals: { "user:alice@korral.example": ["dairy"] },
});
const alice = { id: "user:alice@korral.example" };
const RAW = `RAW_GRPC_DETAIL on ${NAME} CANARY-7f3e`;
const DEADLINE_MS = 100;

function setUp(
  env: NodeJS.ProcessEnv = { KORRAL_POLICY_SECRET: "storelink-policy" },
  client: FakeSecretManager | Promise<FakeSecretManager> = new FakeSecretManager(),
) {
  let now = 5_000_000;
  const config = loadConfig({
    GOOGLE_CLOUD_PROJECT: "korral-prod",
    KORRAL_KEY_DEADLINE_MS: String(DEADLINE_MS),
    ...env,
  });
  const source = policySourceFor(config, { secretClient: client, now: () => now });
  if (source === undefined) throw new Error("expected a policy source");
  return { source, advance: (ms: number) => (now += ms) };
}

function problemOf(policy: StorePolicy): string {
  expect(policy.mode).toBe("unavailable");
  const decision = policy.may(alice, "order", "47");
  expect(decision.allowed).toBe(false);
  return decision.reason.replace(/^store policy unavailable: /, "");
}

describe("the policy secret", () => {
  it("is the latest version of the secret id in GOOGLE_CLOUD_PROJECT, read with the deadline", async () => {
    const sm = new FakeSecretManager();
    sm.secrets.set(NAME, GOOD);
    const { source } = setUp(undefined, sm);
    const policy = await source.current();
    expect(policy.mode).toBe("shadow");
    expect(policy.may(alice, "order", "47").verdict).toBe("granted");
    expect(sm.calls).toEqual([{ name: NAME, options: { timeout: DEADLINE_MS } }]);
  });

  it("or the version's full name, as given", async () => {
    const sm = new FakeSecretManager();
    const full = "projects/other-proj/secrets/policy/versions/3";
    sm.secrets.set(full, new TextEncoder().encode(GOOD));
    const { source } = setUp({ KORRAL_POLICY_SECRET: full }, sm);
    expect((await source.current()).mode).toBe("shadow");
    expect(sm.calls.map((c) => c.name)).toEqual([full]);
  });

  it("is read once per cache period, calls arriving together sharing the read", async () => {
    const sm = new FakeSecretManager();
    sm.secrets.set(NAME, GOOD);
    const { source, advance } = setUp(
      { KORRAL_POLICY_SECRET: "storelink-policy", KORRAL_POLICY_CACHE_SECONDS: "30" },
      sm,
    );
    await Promise.all([source.current(), source.current(), source.current()]);
    advance(29_999);
    await source.current();
    expect(sm.calls).toHaveLength(1);
    advance(1);
    await source.current();
    expect(sm.calls).toHaveLength(2);
  });
});

describe("Secret Manager faults give an unavailable policy", () => {
  it.each<[string, (sm: FakeSecretManager) => void, string]>([
    ["NOT_FOUND", () => {}, "policy secret (or its version) does not exist"],
    [
      "PERMISSION_DENIED",
      (sm) => (sm.failWith = grpcError(7, RAW)),
      "permission denied on the policy secret",
    ],
    [
      "UNAUTHENTICATED",
      (sm) => (sm.failWith = grpcError(16, RAW)),
      "not authenticated to Secret Manager",
    ],
    ["UNAVAILABLE", (sm) => (sm.failWith = grpcError(14, RAW)), "Secret Manager unavailable"],
    [
      "DEADLINE_EXCEEDED",
      (sm) => (sm.failWith = grpcError(4, RAW)),
      "Secret Manager deadline exceeded",
    ],
    [
      "a version disabled",
      (sm) => (sm.failWith = grpcError(9, RAW)),
      "secret version is disabled or destroyed",
    ],
    [
      "an error without a code",
      (sm) => (sm.failWith = new Error(RAW)),
      "Secret Manager request failed",
    ],
    ["no answer", (sm) => (sm.hang = true), `policy read took over ${DEADLINE_MS} ms`],
    ["an empty payload", (sm) => sm.secrets.set(NAME, ""), "policy secret is empty"],
    ["a payload of no JSON", (sm) => sm.secrets.set(NAME, `{"version":1,${RAW}`), "not valid JSON"],
    [
      "a payload over the limit",
      (sm) => sm.secrets.set(NAME, GOOD.padEnd(POLICY_MAX_BYTES + 1, " ")),
      "policy secret is larger than 1 MiB",
    ],
    [
      "a payload of the wrong shape",
      (sm) =>
        sm.secrets.set(NAME, JSON.stringify({ version: 1, groups: {}, principals: {}, [RAW]: 1 })),
      "not a store policy: the document: a field not in the documented shape",
    ],
  ])("%s", async (_name, fault, problem) => {
    const log = captureOpsLog();
    try {
      const sm = new FakeSecretManager();
      fault(sm);
      const { source } = setUp(undefined, sm);
      expect(problemOf(await source.current())).toBe(problem);
      // Operators are told, once, with the category and the secret's name; never gRPC's text.
      const lines = log.lines().filter((l) => l.problem !== undefined);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatchObject({ policy: NAME, problem, level: 50 });
      expect(log.text()).not.toContain("CANARY");
    } finally {
      log.restore();
    }
  });

  it("a fault that clears is over after the retry interval, whatever the cache", async () => {
    const sm = new FakeSecretManager();
    sm.failWith = grpcError(14, RAW);
    const { source, advance } = setUp(
      { KORRAL_POLICY_SECRET: "storelink-policy", KORRAL_POLICY_CACHE_SECONDS: "300" },
      sm,
    );
    expect(problemOf(await source.current())).toBe("Secret Manager unavailable");
    sm.failWith = undefined;
    sm.secrets.set(NAME, GOOD);
    advance(POLICY_RETRY_MS);
    expect((await source.current()).mode).toBe("shadow");
  });

  it("a client that cannot start: unavailable on every read, no unhandled rejection", async () => {
    const failing = Promise.reject(new Error(`no credentials ${RAW}`));
    const { source, advance } = setUp(undefined, failing);
    expect(problemOf(await source.current())).toBe("Secret Manager client could not start");
    advance(POLICY_RETRY_MS);
    expect(problemOf(await source.current())).toBe("Secret Manager client could not start");
  });

  it("a client still starting is waited for", async () => {
    const sm = new FakeSecretManager();
    sm.secrets.set(NAME, GOOD);
    let ready: (client: FakeSecretManager) => void = () => {};
    const starting = new Promise<FakeSecretManager>((resolve) => {
      ready = resolve;
    });
    const { source } = setUp(undefined, starting);
    const pending = source.current();
    ready(sm);
    expect((await pending).mode).toBe("shadow");
  });
});
