// Builds korral-storelink.mcpb, the one-click install for desktop MCP clients (an MCP Bundle),
// with the official mcpb CLI. Run through `npm run pack:desktop`, which builds dist/ first.
//
//   node scripts/pack-desktop.mjs [output.mcpb]     (default: ./korral-storelink.mcpb)
//
// The bundle holds manifest.json (checked in; test/desktop/ keeps its version and tools in step
// with package.json and the server), a package.json, the compiled dist/*.js and the production
// node_modules that dist/ loads at run time. Nothing else: no keys.json, no log/, no src/ or
// test/, no source maps (their sourcesContent is the source). The buyer points the bundle at the
// key file Korral IT gives them when installing it (user_config.keys_file).
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  cpSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const output = resolve(process.argv[2] ?? join(root, "korral-storelink.mcpb"));

/**
 * What dist/ loads from node_modules when run as dist/stdio.js. bundle.mjs keeps these
 * external: pino (and its worker transports); the MCP SDK is bundled. Left out on purpose:
 * @google-cloud/secret-manager, most of the production install by size, which dist/ imports only
 * when KORRAL_KEY_SOURCE=secret-manager (a Cloud Run setting the manifest never makes), and
 * iconv-lite, which only Express's body parser (dist/http.js) loads.
 */
const RUNTIME_DEPENDENCIES = ["pino"];

const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
const manifest = JSON.parse(readFileSync(join(root, "manifest.json"), "utf8"));
if (manifest.version !== pkg.version) {
  fail(`manifest.json version ${manifest.version} is not package.json's ${pkg.version}`);
}
if (!existsSync(join(root, "dist/stdio.js"))) fail("dist/stdio.js is missing: run npm run build");

const stage = mkdtempSync(join(tmpdir(), "korral-mcpb-"));
try {
  writeFileSync(join(stage, "manifest.json"), `${JSON.stringify(manifest, null, 2)}\n`);
  // dist/ is ESM: "type": "module" must travel with it.
  const dependencies = Object.fromEntries(
    RUNTIME_DEPENDENCIES.map((name) => [name, pkg.dependencies[name]]),
  );
  const stagedPkg = {
    name: pkg.name,
    version: pkg.version,
    description: pkg.description,
    type: "module",
    private: true,
    engines: pkg.engines,
    dependencies,
  };
  writeFileSync(join(stage, "package.json"), `${JSON.stringify(stagedPkg, null, 2)}\n`);
  // With the project's lockfile, npm keeps the locked versions of what remains.
  cpSync(join(root, "package-lock.json"), join(stage, "package-lock.json"));
  cpSync(join(root, "dist"), join(stage, "dist"), {
    recursive: true,
    filter: (src) => statSync(src).isDirectory() || src.endsWith(".js"),
  });
  execFileSync(
    "npm",
    [
      "install",
      "--omit=dev",
      "--ignore-scripts",
      "--no-audit",
      "--no-fund",
      "--loglevel=error",
      "--prefer-offline",
    ],
    {
      cwd: stage,
      stdio: ["ignore", "ignore", "inherit"],
      env: { ...process.env, NODE_ENV: "production" },
    },
  );
  // mcpb pack leaves out package-lock.json, node_modules/.bin and *.map by itself.
  const cli = join(root, "node_modules/@anthropic-ai/mcpb/dist/cli/cli.js");
  execFileSync(process.execPath, [cli, "pack", stage, output], {
    stdio: ["ignore", "ignore", "inherit"],
  });
} finally {
  rmSync(stage, { recursive: true, force: true });
}

const bytes = readFileSync(output);
const sha256 = createHash("sha256").update(bytes).digest("hex");
// The SHA-256 is what server.json's package entry carries where the bundle is published.
process.stdout.write(
  `${output}: ${(bytes.length / 1024 / 1024).toFixed(1)} MB (${bytes.length} bytes), sha256 ${sha256}\n`,
);

function fail(message) {
  console.error(`pack:desktop: ${message}`);
  process.exit(1);
}
