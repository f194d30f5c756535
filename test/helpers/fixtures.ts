import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SEED_ACCEPTED_KEYS } from "../../src/storelink/seed.js";

/** A temp dir with a keys.json (default: every seeded key) and a log dir, for spawned servers. */
export async function tempWorkspace(keys: Record<string, string> = { ...SEED_ACCEPTED_KEYS }) {
  const dir = await mkdtemp(join(tmpdir(), "korral-"));
  const keysFile = join(dir, "keys.json");
  await writeFile(keysFile, JSON.stringify(keys));
  return { dir, keysFile, logDir: join(dir, "log") };
}
