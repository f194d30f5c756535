import { randomBytes } from "node:crypto";
import { readdir, readFile, stat } from "node:fs/promises";
import { join } from "node:path";

/** Fresh, unguessable canary keys, one per store id: if one shows up anywhere, it leaked. */
export function canaryKeys(storeIds: readonly string[]): Record<string, string> {
  return Object.fromEntries(
    storeIds.map((id) => [id, `slk_${id}_CANARY${randomBytes(12).toString("hex")}`]),
  );
}

/**
 * Every form in which a canary could leak: raw, base64 and base64url (at each of the three byte
 * alignments, so it is found inside a longer encoded blob too), hex, and JSON/URI escaping.
 */
export function leakForms(canary: string): string[] {
  const forms = new Set<string>([canary, encodeURIComponent(canary), JSON.stringify(canary)]);
  const bytes = Buffer.from(canary, "utf8");
  forms.add(bytes.toString("hex"));
  for (let offset = 0; offset < 3; offset++) {
    const shifted = Buffer.concat([Buffer.alloc(offset, 0x20), bytes]);
    for (const encoding of ["base64", "base64url"] as const) {
      // Drop the 4-character groups at either end: they mix with unknown neighbouring bytes.
      const core = shifted.toString(encoding).replace(/=+$/, "").slice(4, -4);
      if (core.length >= 16) forms.add(core);
    }
  }
  return [...forms];
}

/** The leaked forms of any canary found in `text`, labelled with where it was found. */
export function findLeaks(where: string, text: string, canaries: readonly string[]): string[] {
  const leaks: string[] = [];
  for (const canary of canaries) {
    for (const form of leakForms(canary)) {
      if (text.includes(form))
        leaks.push(`${where}: ${form === canary ? "raw" : "encoded"} ${form}`);
    }
  }
  return leaks;
}

/** Every regular file under `dir` (recursively), with its text; a missing dir is empty. */
export async function filesUnder(dir: string): Promise<{ path: string; text: string }[]> {
  const found: { path: string; text: string }[] = [];
  let entries: string[];
  try {
    entries = await readdir(dir);
  } catch {
    return found;
  }
  for (const entry of entries) {
    const path = join(dir, entry);
    const info = await stat(path);
    if (info.isDirectory()) found.push(...(await filesUnder(path)));
    else found.push({ path, text: await readFile(path, "utf8") });
  }
  return found;
}
