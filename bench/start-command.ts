import { readFileSync } from "node:fs";

/**
 * The node arguments the image starts the service with: `npm run start:http` is the Dockerfile's
 * CMD (a deploy test holds them together), node flags included, so every bench runs the service
 * as it is deployed.
 */
export function startHttpArgs(root: string): { flags: string[]; args: string[] } {
  const script = (
    JSON.parse(readFileSync(`${root}/package.json`, "utf8")) as {
      scripts: Record<string, string>;
    }
  ).scripts["start:http"];
  const words = script?.split(" ") ?? [];
  if (words[0] !== "node" || words.at(-1) !== "dist/http.js") {
    throw new Error(`unexpected start:http script: ${script}`);
  }
  const args = words.slice(1);
  return { flags: args.slice(0, -1), args };
}
