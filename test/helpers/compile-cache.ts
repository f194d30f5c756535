import { fileURLToPath } from "node:url";

/** The Node 22 the image runs (the conformance suite's, which `.ci/run` installs); also the OAuth tests' authorization server's. */
export const NODE_22 = fileURLToPath(
  new URL("../../conformance/node_modules/node/bin/node", import.meta.url),
);

/** The runtime stage's CMD: its node flags, and its entry. */
export function cmdOf(dockerfile: string): { flags: string[]; entry: string } {
  const cmd = JSON.parse(/^CMD (\[.*\])$/m.exec(dockerfile)?.[1] ?? "[]") as string[];
  return { flags: cmd.slice(1, -1), entry: cmd.at(-1) ?? "" };
}

/** The Dockerfile's warm-up RUN, continuations joined, without `RUN` and its flags. */
export function warmRunOf(dockerfile: string): string {
  const joined = dockerfile.replace(/\\\r?\n\s*/g, " ");
  const line = joined.split("\n").find((l) => l.startsWith("RUN") && l.includes("warm-compile"));
  return (line ?? "").replace(/^RUN\s+(--\S+\s+)*/, "");
}

/**
 * What a start run with NODE_DEBUG_NATIVE=COMPILE_CACHE says of the modules under `prefix` (a
 * path or a file URL): how many it looked up, found unchanged, could not use (missing, refused,
 * unreadable), and wrote anew.
 */
export function cacheUse(output: string, prefix: string) {
  const lines = output
    .split("\n")
    .filter((l) => l.includes("[compile cache]") && l.includes(prefix));
  return {
    read: lines.filter((l) => /reading cache from /.test(l)).length,
    hits: lines.filter((l) => /because cache was the same/.test(l)).length,
    unusable: lines.filter((l) =>
      /reading cache from .*(no such file|denied|mismatch|reject)/i.test(l),
    ),
    written: lines.filter((l) => /writing cache for/.test(l)),
  };
}
