import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runProcess } from "../helpers/spawn.js";

/** scripts/check-policy.ts, as docs/identity.md tells an operator to run it. */

const ROOT = join(import.meta.dirname, "../..");
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "korral-check-policy-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function check(file: string): Promise<{ code: number; out: string; err: string }> {
  const ran = await runProcess(
    process.execPath,
    ["--import", "tsx", "scripts/check-policy.ts", file],
    { cwd: ROOT },
  );
  return { code: ran.code ?? -1, out: ran.stdout, err: ran.stderr };
}

describe("scripts/check-policy.ts", () => {
  it("says ok and the mode for the documented example", async () => {
    expect(await check("docs/policy.example.json")).toEqual({
      code: 0,
      out: "ok (enforce)\n",
      err: "",
    });
  });

  it("says where a policy is wrong, exits 1, and never prints the file", async () => {
    const path = join(dir, "bad.json");
    await writeFile(
      path,
      JSON.stringify({
        version: 1,
        groups: { g: { read: { stores: ["CANARY/1"] } } },
        principals: {},
      }),
    );
    const result = await check(path);
    expect(result.code).toBe(1);
    expect(result.out).toBe("");
    expect(result.err).toMatch(/^not a store policy: groups\.g\.read\.stores\[0\]: a store id is/);
    expect(result.err).not.toContain("CANARY");
  });

  it("a missing file is said as the server would", async () => {
    const result = await check(join(dir, "none.json"));
    expect(result).toMatchObject({ code: 1, err: "policy file does not exist\n" });
  });
});
