import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { runSyncOk } from "../helpers/spawn.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

describe("the bundled build (npm test builds first)", () => {
  it("resolves the default keys file and log dir from the project root, not from a chunk", () => {
    const out = runSyncOk(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        "const { loadConfig } = await import('./dist/config.js'); const c = loadConfig({}); process.stdout.write(JSON.stringify([c.keysFile, c.logDir]));",
      ],
      { cwd: ROOT },
    );
    expect(JSON.parse(out)).toEqual([`${ROOT}keys.json`, `${ROOT}log`]);
  });
});
