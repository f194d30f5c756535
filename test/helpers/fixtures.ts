import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach } from "vitest";
import { SEED_ACCEPTED_KEYS } from "../../src/storelink/seed.js";
import { spawnDist } from "./spawn.js";

/** A temp dir with a keys.json (default: every seeded key) and a log dir, for spawned servers. */
export async function tempWorkspace(keys: Record<string, string> = { ...SEED_ACCEPTED_KEYS }) {
  const dir = await mkdtemp(join(tmpdir(), "korral-"));
  const keysFile = join(dir, "keys.json");
  await writeFile(keysFile, JSON.stringify(keys));
  return { dir, keysFile, logDir: join(dir, "log") };
}

/**
 * A store policy (docs/identity.md#store-policy) letting each principal read and order for every
 * store: what a test that starts with KORRAL_AUTH on, and is not about the policy, gives it.
 */
export const grantingAll = (...principals: string[]) => ({
  version: 1,
  mode: "enforce",
  groups: { everything: { read: { stores: "*" }, order: { stores: "*" } } },
  principals: Object.fromEntries(principals.map((principal) => [principal, ["everything"]])),
});

/** Writes `document` as `policy.json` in `dir`; returns its path, for KORRAL_POLICY_FILE. */
export async function policyFile(dir: string, document: object): Promise<string> {
  const path = join(dir, "policy.json");
  await writeFile(path, JSON.stringify(document));
  return path;
}

/**
 * Steps undone after each test of the calling file, last in first out and one at a time: a
 * server must be gone before its directory is removed (a live server recreating its log dir made
 * rm fail with ENOTEMPTY). Call once, at the top level of a test file.
 */
export function undoAfterEach() {
  const steps: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const step of steps.splice(0).reverse()) await step();
  });
  const defer = (step: () => Promise<unknown>): void => {
    steps.push(step);
  };
  /** A tempWorkspace, removed after the test. */
  const workspace = async (keys?: Record<string, string>) => {
    const ws = await tempWorkspace(keys);
    defer(() => rm(ws.dir, { recursive: true, force: true }));
    return ws;
  };
  return {
    defer,
    workspace,
    /** The built stdio entry over a fresh workspace, stopped after the test. */
    async stdio() {
      const ws = await workspace();
      const server = spawnDist("stdio.js", {
        KORRAL_KEYS_FILE: ws.keysFile,
        KORRAL_LOG_DIR: ws.logDir,
      });
      defer(() => server.stop());
      return { ws, server };
    },
  };
}
