// The build: every src/**/*.ts module becomes dist/**/*.js (same path, same exports), bundled
// by esbuild with the runtime dependencies pulled into shared chunks. It does not type-check:
// `npm run typecheck` does, once, in CI. Shared code lives in one chunk, so `node dist/http.js` and anything importing dist modules see one
// copy of each class. A start loads a few chunks, never hundreds of small node_modules files
// (docs/performance.md). Kept external: packages that read files relative to their own install
// directory at run time (gRPC protos, pino's worker transports), and iconv-lite, whose code-page
// tables body-parser needs only for non-UTF-8 bodies: from node_modules they stay behind lazy
// require() calls instead of being compiled into the Express chunk at every start.
import { readdirSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const dist = fileURLToPath(new URL("../dist", import.meta.url));
const buildRequire = createRequire(import.meta.url);
const src = fileURLToPath(new URL("../src", import.meta.url));

// Chunks sit in dist/ itself, beside the files compiled from src/*.ts, so module-relative paths
// in those files (config.ts: `new URL("../keys.json", import.meta.url)`) keep resolving to the
// project root wherever the bundler places the code. (A src/ subdirectory module must not use
// import.meta.url for paths; test/build.test.ts checks the one that does.)
rmSync(dist, { recursive: true, force: true });

// node-redis requires `@opentelemetry/api` only inside its own OpenTelemetry set-up, which this
// server never calls (telemetry is src/telemetry/, loaded only when asked): left to esbuild, that
// require pulls the API into a chunk every Redis start loads. It gets an empty module instead;
// called anyway, node-redis reports the API as not installed.
const redisWithoutTelemetry = {
  name: "redis-without-telemetry",
  setup(build) {
    build.onResolve({ filter: /^@opentelemetry\/api$/ }, (args) =>
      args.importer.includes("@redis/client")
        ? { path: args.path, namespace: "absent" }
        : undefined,
    );
    build.onLoad({ filter: /.*/, namespace: "absent" }, () => ({
      contents: "throw new Error('not bundled');",
      loader: "js",
    }));
  },
};
// node:http is required, never imported (statically or dynamically): on Node 22 an ESM import of
// it builds a facade that reads every export, and its lazy WebSocket getters load undici: about
// 40 ms of a start, against 3 ms for a require (docs/performance.md). An import of it gets a
// module that requires it and exports its plain values by name (a dynamically imported chunk
// has no CommonJS interop), never its getters, which stay unread. The other built-ins' facades
// cost a millisecond or two and keep their imports. Checked after the build, below.
const HTTP_MODULE = /^(node:)?http$/;
const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;
const httpRequired = {
  name: "http-required",
  setup(build) {
    build.onResolve({ filter: HTTP_MODULE }, (args) =>
      args.kind === "import-statement" || args.kind === "dynamic-import"
        ? { path: args.path, namespace: "required" }
        : undefined,
    );
    build.onLoad({ filter: /.*/, namespace: "required" }, (args) => {
      const descriptors = Object.getOwnPropertyDescriptors(buildRequire(args.path));
      const names = Object.keys(descriptors).filter(
        (name) => "value" in descriptors[name] && IDENTIFIER.test(name) && name !== "default",
      );
      return {
        contents: [
          `const required = require(${JSON.stringify(args.path)});`,
          "export default required;",
          ...names.map((name) => `export const ${name} = required.${name};`),
        ].join("\n"),
        loader: "js",
      };
    });
  },
};
const entryPoints = readdirSync(src, { recursive: true })
  .filter((file) => file.endsWith(".ts") && !file.endsWith(".d.ts"))
  .map((file) => `${src}/${file}`);

await build({
  entryPoints,
  outbase: src,
  outdir: dist,
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20",
  // Whitespace and syntax minified, identifiers kept: functions and classes keep their names
  // without esbuild's keepNames, whose `__name` call on every function and closure created cost
  // about 10% of a lookup_sku's CPU (docs/performance.md).
  minifyWhitespace: true,
  minifySyntax: true,
  sourcemap: "linked",
  chunkNames: "[name]-[hash]",
  // ESM builds first where a package ships both without an exports map (only @opentelemetry/*
  // here): its ESM imports bind directly, where a bundled CommonJS build is read through
  // esbuild's interop getters on every access (sampling and export, per span).
  mainFields: ["module", "main"],
  external: [
    "@google-cloud/*",
    "google-gax",
    "@grpc/*",
    "pino",
    "pino-*",
    "thread-stream",
    "iconv-lite",
  ],
  // Some bundled CommonJS packages call require() for Node built-ins.
  banner: {
    js: "import { createRequire as __korralRequire } from 'node:module'; const require = __korralRequire(import.meta.url);",
  },
  logLevel: "warning",
  plugins: [redisWithoutTelemetry, httpRequired],
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
