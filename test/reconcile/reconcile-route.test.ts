import request from "supertest";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { composeDeps } from "../../src/deps.js";
import { createApp } from "../../src/http/app.js";
import type { ReconcileReport } from "../../src/lifecycle/reconcile.js";
import { CachedPolicySource } from "../../src/policy/policy-source.js";
import { parsePolicy } from "../../src/policy/store-policy.js";
import { MapKeyProvider } from "../helpers/harness.js";

/**
 * POST /internal/reconcile, for a Cloud Scheduler job: the caller is authenticated as /mcp's are,
 * and only a principal the store policy gives `"reconcile": true` may run a pass.
 */

const REPORT: ReconcileReport = { created: 1, notCreated: 2, waiting: 3, errors: 0 };
const CALLER = "local:scheduler";

function app(policy?: object) {
  let runs = 0;
  const deps = composeDeps(
    {
      keys: new MapKeyProvider(),
      ...(policy === undefined
        ? {}
        : {
            policy: new CachedPolicySource("test policy", async () => ({
              text: JSON.stringify(policy),
            })),
          }),
    },
    loadConfig({}),
  );
  const express = createApp(deps, {
    unverifiedPrincipal: CALLER,
    reconcile: async () => {
      runs++;
      return REPORT;
    },
  });
  return { express, runs: () => runs };
}

const policyWith = (reconcile: boolean) => ({
  version: 1,
  groups: {
    scheduler: reconcile ? { reconcile: true } : { read: { stores: "*" } },
  },
  principals: { [CALLER]: ["scheduler"] },
});

describe("POST /internal/reconcile", () => {
  it("runs a pass and answers its report when no policy is configured (loopback, no auth)", async () => {
    const { express, runs } = app();
    const res = await request(express).post("/internal/reconcile").expect(200);
    expect(res.body).toEqual(REPORT);
    expect(runs()).toBe(1);
  });

  it("runs for a principal whose group has reconcile: true", async () => {
    const { express, runs } = app(policyWith(true));
    await request(express).post("/internal/reconcile").expect(200);
    expect(runs()).toBe(1);
  });

  it("refuses a principal the policy does not let reconcile (403), without running", async () => {
    const { express, runs } = app(policyWith(false));
    const res = await request(express).post("/internal/reconcile").expect(403);
    expect(res.body).toEqual({ error: "not_permitted" });
    expect(runs()).toBe(0);
  });

  it("refuses with 503 while the policy cannot be read, without running", async () => {
    const { express, runs } = app({ version: 2 });
    await request(express).post("/internal/reconcile").expect(503);
    expect(runs()).toBe(0);
  });

  it("is no route where the app was given no reconciler", async () => {
    const deps = composeDeps({ keys: new MapKeyProvider() }, loadConfig({}));
    await request(createApp(deps)).post("/internal/reconcile").expect(404);
  });

  it("a refused browser origin never reaches it", async () => {
    const { express, runs } = app();
    await request(express)
      .post("/internal/reconcile")
      .set("origin", "https://evil.example")
      .expect(403);
    expect(runs()).toBe(0);
  });
});

describe("the policy's reconcile grant", () => {
  it("is true or absent; anything else is refused with the field named", () => {
    const doc = (reconcile: unknown) =>
      JSON.stringify({ version: 1, groups: { s: { reconcile } }, principals: {} });
    expect("policy" in parsePolicy(doc(true))).toBe(true);
    for (const bad of ["yes", false, 1, { stores: "*" }]) {
      const parsed = parsePolicy(doc(bad));
      expect("problem" in parsed && parsed.problem).toMatch(/reconcile/);
    }
  });

  it("grants nothing else: a reconcile group neither reads nor orders", () => {
    const parsed = parsePolicy(
      JSON.stringify({
        version: 1,
        groups: { s: { reconcile: true } },
        principals: { [CALLER]: ["s"] },
      }),
    );
    if (!("policy" in parsed)) throw new Error(parsed.problem);
    expect(parsed.policy.mayReconcile({ id: CALLER }).allowed).toBe(true);
    expect(parsed.policy.may({ id: CALLER }, "read", "47").allowed).toBe(false);
    expect(parsed.policy.may({ id: CALLER }, "order", "47").allowed).toBe(false);
    expect(parsed.policy.mayReconcile({ id: "local:someone-else" }).allowed).toBe(false);
  });
});
