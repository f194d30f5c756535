import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Ajv } from "ajv";
import addFormatsModule from "ajv-formats";
import { describe, expect, it } from "vitest";

/**
 * server.json, the MCP Registry entry an internal registry or catalogue reads, validated against
 * the registry's published schema (vendored: schemas/server.schema.json, 2025-12-11) and kept in
 * step with package.json and the desktop bundle's manifest.
 */
const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const read = (file: string) => JSON.parse(readFileSync(join(ROOT, file), "utf8"));

const schema = read("schemas/server.schema.json");
const serverJson = read("server.json");
const pkg = read("package.json");
const manifest = read("manifest.json");

// ajv-formats is CommonJS: under ESM interop its function is the module's `default` property.
const addFormats = addFormatsModule.default;
const ajv = new Ajv({ allErrors: true, strict: false });
addFormats(ajv);
const validate = ajv.compile(schema);

describe("server.json (MCP Registry format)", () => {
  it("declares and passes the vendored 2025-12-11 schema", () => {
    expect(schema.$id).toBe(
      "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
    );
    expect(serverJson.$schema).toBe(schema.$id);
    expect(validate(serverJson), JSON.stringify(validate.errors, null, 2)).toBe(true);
  });

  it("is checked by a live validator (an over-long description fails)", () => {
    expect(validate({ ...serverJson, description: "x".repeat(101) })).toBe(false);
    expect(validate({ ...serverJson, name: "no-namespace" })).toBe(false);
  });

  it("carries package.json's name (mcpName), version and description", () => {
    expect(serverJson.name).toBe(pkg.mcpName);
    expect(serverJson.name.split("/")[1]).toBe(pkg.name);
    expect(serverJson.version).toBe(pkg.version);
    expect(serverJson.description).toBe(pkg.description);
  });

  it("describes the desktop bundle as its stdio package, at this version", () => {
    const [bundle] = serverJson.packages;
    expect(serverJson.packages).toHaveLength(1);
    expect(bundle).toMatchObject({ registryType: "mcpb", transport: { type: "stdio" } });
    expect(bundle.version).toBe(pkg.version);
    expect(bundle.identifier).toMatch(
      new RegExp(`^https://.+/${pkg.version.replaceAll(".", "\\.")}/korral-storelink\\.mcpb$`),
    );
    // The same settings the bundle's install dialog asks for.
    expect(bundle.environmentVariables.map((v: { name: string }) => v.name)).toEqual(
      Object.keys(manifest.server.mcp_config.env),
    );
    const required = bundle.environmentVariables
      .filter((v: { isRequired?: boolean }) => v.isRequired)
      .map((v: { name: string }) => v.name);
    expect(required).toEqual(["KORRAL_KEYS_FILE", "KORRAL_LOG_DIR"]);
  });

  it("describes the HTTP service as a streamable-http remote at /mcp, behind an identity token", () => {
    expect(serverJson.remotes).toHaveLength(1);
    const [remote] = serverJson.remotes;
    expect(remote.type).toBe("streamable-http");
    expect(remote.url).toBe("https://{host}/mcp");
    expect(remote.variables.host.isRequired).toBe(true);
    expect(remote.headers).toEqual([
      expect.objectContaining({ name: "Authorization", isRequired: true, isSecret: true }),
    ]);
  });
});
