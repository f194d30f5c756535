import { rm } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { policyFile, tempWorkspace } from "../helpers/fixtures.js";
import {
  AGENT,
  READ_SCOPE,
  type RunningAs,
  type ServiceClient,
  startAuthorizationServer,
} from "../helpers/oauth-as.js";
import {
  type RecordingStoreLink,
  startRecordingStoreLink,
} from "../helpers/recording-storelink.js";
import { freePort, type Spawned, spawnDist, waitForHealthy } from "../helpers/spawn.js";

/**
 * POST /internal/reconcile on the built server with OAuth on and a real authorization server: a
 * caller without a token is refused 401 (with the resource metadata, as /mcp does); a verified
 * caller the policy does not let reconcile is refused 403; the scheduler's client, whose group
 * has `"reconcile": true`, runs a pass and gets its report.
 */

const SCHEDULER: ServiceClient = {
  clientId: "reconcile-scheduler",
  clientSecret: "scheduler-secret-for-tests-only",
  scope: READ_SCOPE,
};

const POLICY = {
  version: 1,
  mode: "enforce",
  groups: {
    brno: { read: { stores: ["47"] }, order: { stores: ["47"] } },
    scheduler: { reconcile: true },
  },
  principals: {
    [`client:${AGENT.clientId}`]: ["brno"],
    [`client:${SCHEDULER.clientId}`]: ["scheduler"],
  },
};

let as: RunningAs;
let storelink: RecordingStoreLink;
let server: Spawned;
let base: string;
let resource: string;
let ws: Awaited<ReturnType<typeof tempWorkspace>>;

beforeAll(async () => {
  ws = await tempWorkspace();
  const policy = await policyFile(ws.dir, POLICY);
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  resource = `${base}/mcp`;
  as = await startAuthorizationServer({ resources: [resource], clients: [AGENT, SCHEDULER] });
  storelink = await startRecordingStoreLink();
  server = spawnDist("http.js", {
    HOST: "127.0.0.1",
    PORT: String(port),
    STORELINK_URL: storelink.url,
    KORRAL_KEYS_FILE: ws.keysFile,
    KORRAL_LOG_DIR: ws.logDir,
    KORRAL_AUTH: "oauth",
    KORRAL_OAUTH_ISSUER: as.issuer,
    KORRAL_OAUTH_RESOURCE: resource,
    KORRAL_POLICY_FILE: policy,
  });
  await waitForHealthy(server, `${base}/healthz`);
});

afterAll(async () => {
  await server?.stop();
  await storelink?.close();
  await as?.stop();
  if (ws) await rm(ws.dir, { recursive: true, force: true });
});

const reconcile = async (client?: ServiceClient) =>
  fetch(`${base}/internal/reconcile`, {
    method: "POST",
    headers: client ? { authorization: `Bearer ${await as.tokenFor(client, resource)}` } : {},
  });

describe("POST /internal/reconcile with OAuth", () => {
  it("refuses a caller without a token (401, pointing at the resource metadata)", async () => {
    const res = await reconcile();
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toContain("resource_metadata=");
  });

  it("refuses a verified caller the policy does not let reconcile (403)", async () => {
    const res = await reconcile(AGENT);
    expect(res.status).toBe(403);
    expect(await res.json()).toEqual({ error: "not_permitted" });
  });

  it("runs a pass for the scheduler's client and answers its report", async () => {
    const res = await reconcile(SCHEDULER);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ created: 0, notCreated: 0, waiting: 0, errors: 0 });
  });
});
