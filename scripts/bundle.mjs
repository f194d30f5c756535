// The build: every src/**/*.ts module becomes dist/**/*.js (same path, same exports), bundled
// by esbuild with the runtime dependencies pulled into shared chunks. It does not type-check:
// `npm run typecheck` does, once, in CI. Shared code lives in one chunk, so `node dist/http.js` and anything importing dist modules see one
// copy of each class. A start loads a few chunks, never hundreds of small node_modules files
// (docs/performance.md). Kept external: packages that read files relative to their own install
// directory at run time (gRPC protos, pino's worker transports), and iconv-lite, whose code-page
// tables body-parser needs only for non-UTF-8 bodies: from node_modules they stay behind lazy
// require() calls instead of being compiled into the Express chunk at every start.
import { readdirSync, readFileSync, rmSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { NODE_BUNDLE } from "./node-bundle.mjs";

const dist = fileURLToPath(new URL("../dist", import.meta.url));
const src = fileURLToPath(new URL("../src", import.meta.url));

// Chunks sit in dist/ itself, beside the files compiled from src/*.ts, so module-relative paths
// in those files (config.ts: `new URL("../keys.json", import.meta.url)`) keep resolving to the
// project root wherever the bundler places the code. (A src/ subdirectory module must not use
// import.meta.url for paths; test/build.test.ts checks the one that does.)
rmSync(dist, { recursive: true, force: true });

const entryPoints = readdirSync(src, { recursive: true })
  .filter((file) => file.endsWith(".ts") && !file.endsWith(".d.ts"))
  .map((file) => `${src}/${file}`);

await build({
  ...NODE_BUNDLE,
  entryPoints,
  outbase: src,
  outdir: dist,
});

for (const file of readdirSync(dist, { recursive: true })) {
  if (!file.endsWith(".js")) continue;
  const code = readFileSync(`${dist}/${file}`, "utf8");
  if (/from\s*["'](node:)?http["']|import\(\s*["'](node:)?http["']\s*\)/.test(code)) {
    throw new Error(`dist/${file} imports node:http: it must be required (see httpRequired)`);
  }
}

// An executable entry imported by another module would have its code moved into a shared chunk,
// where its `import.meta.url === argv[1]` start-up guard never matches: fail the build instead.
for (const entry of ["http.js", "storelink-emulator.js"]) {
  if (!readFileSync(`${dist}/${entry}`, "utf8").includes("process.argv")) {
    throw new Error(
      `dist/${entry} lost its start-up code: is src/${entry.replace(".js", ".ts")} imported by another src module?`,
    );
  }
}
