import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { COMMAND, generatedTexts, ROOT } from "../../scripts/texts.js";
import { NODE_VARIABLES, VARIABLES } from "../../src/config.js";
import { TOOL_NAMES } from "../../src/tools/names.js";

/**
 * The texts that restate the code's declarations (manifest.json's tools and prompt, the tool
 * tables, the variable tables) are written by `npm run texts` (scripts/texts.ts), never by hand:
 * each file must be exactly what the generator writes from the code as it is now.
 */
const read = (file: string) => readFileSync(join(ROOT, file), "utf8");
const generated = generatedTexts();

describe("texts generated from the code", () => {
  it.each(generated)("$file is as `npm run texts` writes it", ({ file, text }) => {
    const lines = read(file).split("\n");
    const wanted = text.split("\n");
    const first = wanted.findIndex((line, i) => lines[i] !== line);
    const where = first === -1 ? "at its end" : `from line ${first + 1}`;
    expect(read(file), `${file} is stale ${where}: run ${COMMAND}`).toBe(text);
  });

  it("covers the manifest and every page with a generated table", () => {
    expect(generated.map((g) => g.file).sort()).toEqual(
      [
        "DEPLOYMENT.md",
        "README.md",
        "docs/configuration.md",
        "docs/logging.md",
        "docs/tools.md",
        "manifest.json",
      ].sort(),
    );
  });

  it("a hand edit between the markers is stale (the check can fail)", () => {
    const edited = (file: string) =>
      file === "README.md"
        ? read(file).replace("| `lookup_sku` | read |", "| `lookup_sku` | read, by hand |")
        : read(file);
    const readme = generatedTexts(edited).find((g) => g.file === "README.md")?.text;
    expect(readme).toBe(read("README.md"));
    expect(edited("README.md")).not.toBe(readme);
  });

  it("a page without its markers is refused, naming them", () => {
    const unmarked = (file: string) =>
      file === "docs/tools.md" ? read(file).replace("<!-- /generated:tools -->", "") : read(file);
    expect(() => generatedTexts(unmarked)).toThrow(
      "docs/tools.md lacks the markers <!-- generated:tools --> ... <!-- /generated:tools -->",
    );
  });
});

describe("what the generated texts hold", () => {
  const textOf = (file: string) => generated.find((g) => g.file === file)?.text ?? "";
  /** The names of `names` a text mentions, in the order they first appear. */
  const namedIn = (text: string, names: readonly string[]) =>
    names
      .filter((name) => text.includes(`\`${name}\``) || text.includes(`"${name}"`))
      .sort((a, b) => text.indexOf(a) - text.indexOf(b));

  it.each(["README.md", "docs/tools.md"])(
    "%s's tool table names every tool in call order",
    (file) => {
      const section = /<!-- generated:tools -->([\s\S]*?)<!-- \/generated:tools -->/.exec(
        textOf(file),
      )?.[1];
      expect(namedIn(section ?? "", TOOL_NAMES)).toEqual([...TOOL_NAMES]);
    },
  );

  it("manifest.json declares every tool, in order", () => {
    const manifest = JSON.parse(textOf("manifest.json")) as { tools: { name: string }[] };
    expect(manifest.tools.map((tool) => tool.name)).toEqual([...TOOL_NAMES]);
  });

  it.each(["docs/configuration.md", "DEPLOYMENT.md"])(
    "%s has one row for every variable, and no other",
    (file) => {
      const section = /<!-- generated:variables -->([\s\S]*?)<!-- \/generated:variables -->/.exec(
        textOf(file),
      )?.[1];
      const rows = [...(section ?? "").matchAll(/^\| `([A-Z][A-Z0-9_]+)` \|/gm)].map((m) => m[1]);
      expect(rows).toEqual([...Object.keys(VARIABLES), ...Object.keys(NODE_VARIABLES)]);
    },
  );
});
