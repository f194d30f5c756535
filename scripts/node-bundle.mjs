// How every bundle of this project is made (dist/ by scripts/bundle.mjs, and the bench's SDK
// floor): one set of esbuild options, so what the bench compares against is built as dist/ is.
import { createRequire } from "node:module";

const buildRequire = createRequire(import.meta.url);

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
/** esbuild's options for a Node bundle of this project, less its entries and output. */
export const NODE_BUNDLE = {
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
};
