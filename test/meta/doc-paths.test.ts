import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";

/**
 * The documents name files a reader will open: each must exist. Checked in README.md,
 * SECURITY.md, DEPLOYMENT.md, the Dockerfile's comments and every docs/*.md:
 * - a project path (`src/…`, `test/…`, `docs/…`, `scripts/…`, …) from the project root;
 * - a relative Markdown link from the document's own folder;
 * - a bare file name (`BENCHMARKS.md`, `server.json`) from the root or the document's folder.
 * Paths with a glob or a placeholder (`dist/*.js`, `test/<layer>`) are patterns, not files; dist/
 * is the build's output, checked by the tests that spawn it. A link to a section (`#anchor`) must
 * name a heading of its page: the rules are stated once and linked to by section.
 */
const ROOT = join(import.meta.dirname, "../..");

const DOCUMENTS = [
  "README.md",
  "SECURITY.md",
  "DEPLOYMENT.md",
  "Dockerfile",
  ...readdirSync(join(ROOT, "docs"))
    .filter((file) => file.endsWith(".md"))
    .map((file) => `docs/${file}`),
];

/**
 * Names a document uses for files it does not ship: the reader creates them (keys.json, the alert
 * policies and the store policy DEPLOYMENT.md writes, Claude Desktop's own config), or they are
 * not files at all (Express's `express.json`), or a file the guide asks you to write
 * (adding-a-tool.md's example).
 */
const NOT_SHIPPED = new Set([
  "keys.json",
  "claude_desktop_config.json",
  "express.json",
  "uncertain-alert.yaml",
  "startup-alert.yaml",
  "limits-alert.yaml",
  "identity-rates-alert.yaml",
  "identity-alert.yaml",
  "storelink-policy.json",
  "src/tools/get-delivery-window.ts",
]);

const PROJECT_PATH =
  /(?<![\w./-])(?:\.\.\/)?((?:src|test|docs|scripts|bench|schemas|openapi|conformance|\.ci)\/[A-Za-z0-9_./*<>{}-]*)/g;
const LINK = /\]\(([^)\s]+)\)/g;
const BARE_NAME = /(?<![\w/.-])([A-Za-z][\w-]*\.(?:md|json|yaml|yml|mjs))\b/g;

const isPattern = (path: string): boolean => /[*<>{}]/.test(path);
const exists = (path: string): boolean => existsSync(join(ROOT, path));

/** Every file name `text` states that does not exist, as "where: what". */
function missingPaths(document: string, text: string): string[] {
  const missing: string[] = [];
  for (const match of text.matchAll(PROJECT_PATH)) {
    const path = (match[1] ?? "").replace(/[.,;:]+$/, "");
    if (isPattern(path) || NOT_SHIPPED.has(path)) continue;
    if (!exists(path)) missing.push(`${document}: ${path}`);
  }
  // A link is Markdown prose: inside a fenced code block, `](…)` is code (a gcloud --format).
  const prose = text.replace(/^```[^\n]*\n[\s\S]*?^```/gm, "");
  for (const match of prose.matchAll(LINK)) {
    const target = (match[1] ?? "").split("#")[0] ?? "";
    if (target === "" || /^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
    if (!exists(join(dirname(document), target))) missing.push(`${document}: link ${target}`);
  }
  for (const match of text.matchAll(BARE_NAME)) {
    const name = match[1] ?? "";
    if (NOT_SHIPPED.has(name)) continue;
    if (!exists(name) && !exists(join(dirname(document), name))) {
      missing.push(`${document}: ${name}`);
    }
  }
  return missing;
}

describe("the files the documents name", () => {
  it.each(DOCUMENTS)("%s names only files that exist", (document) => {
    const text = readFileSync(join(ROOT, document), "utf8");
    expect(missingPaths(document, text)).toEqual([]);
  });

  it("finds a missing file in each form it looks for (the check can fail)", () => {
    const text = [
      "See `src/server.ts` and src/nowhere/else.ts, [the benchmarks](../BENCHMARKS.md),",
      "and BENCHMARKS.md; but `dist/*.js`, test/<layer>/ and keys.json are fine,",
      "as are `src/mcp/server.ts`, [testing](testing.md) and https://example.com/x.md.",
    ].join("\n");
    expect(missingPaths("docs/example.md", text)).toEqual([
      "docs/example.md: src/server.ts",
      "docs/example.md: src/nowhere/else.ts",
      "docs/example.md: link ../BENCHMARKS.md",
      "docs/example.md: BENCHMARKS.md",
    ]);
  });
});

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens. */
const anchorOf = (heading: string): string =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}_ -]/gu, "")
    .replace(/ /g, "-");

/** The anchors of a Markdown text's headings (outside code blocks). */
const anchorsIn = (text: string): Set<string> =>
  new Set(
    [...text.replace(/^```[^\n]*\n[\s\S]*?^```/gm, "").matchAll(/^#{1,6} (.+)$/gm)].map((m) =>
      anchorOf(m[1] ?? ""),
    ),
  );

/** Every link `document` has to a section (`page.md#anchor`, `#anchor`) that has no such heading. */
function missingAnchors(document: string, text: string, read: (file: string) => string): string[] {
  const prose = text.replace(/^```[^\n]*\n[\s\S]*?^```/gm, "");
  const missing: string[] = [];
  for (const match of prose.matchAll(/\]\(([^)\s#]*\.md)?#([^)\s]+)\)/g)) {
    const target = match[1] === undefined ? document : join(dirname(document), match[1]);
    if (!target.endsWith(".md") || /^[a-z]+:/i.test(match[1] ?? "")) continue;
    if (!anchorsIn(read(target)).has(match[2] ?? ""))
      missing.push(`${document}: ${target}#${match[2]}`);
  }
  return missing;
}

describe("the sections the documents link to", () => {
  const read = (file: string) => readFileSync(join(ROOT, file), "utf8");

  it.each(DOCUMENTS.filter((d) => d.endsWith(".md")))(
    "%s links only to headings that exist",
    (document) => {
      expect(missingAnchors(document, read(document), read)).toEqual([]);
    },
  );

  it("finds a link to a missing section (the check can fail)", () => {
    const pages: Record<string, string> = {
      "docs/a.md":
        "# A\n\n## The `audit.log`, in brief\n\n[x](b.md#nowhere) [y](#the-auditlog-in-brief) [z](#gone)\n",
      "docs/b.md": "# B\n",
    };
    const text = pages["docs/a.md"] ?? "";
    expect(missingAnchors("docs/a.md", text, (file) => pages[file] ?? "")).toEqual([
      "docs/a.md: docs/b.md#nowhere",
      "docs/a.md: docs/a.md#gone",
    ]);
  });
});

describe("README.md's layout", () => {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  const layout = /## Layout\n\n```\n([\s\S]*?)```/.exec(readme)?.[1] ?? "";
  const srcLines = layout.split("\n").filter((line) => /^(src\/|\s+\S+\/ )/.test(line));

  it("names the files at the top of src/ that exist, and each folder of src/", () => {
    expect(srcLines.length, "the layout block has its src/ lines").toBeGreaterThanOrEqual(2);
    const [top = "", folders = ""] = srcLines;
    const topFiles = [...top.matchAll(/([\w-]+\.ts)\b/g)].map((m) => m[1] ?? "");
    const missing = topFiles.filter((file) => !existsSync(join(ROOT, "src", file)));
    expect(missing, "files the layout puts at the top of src/").toEqual([]);

    const named = new Set([...folders.matchAll(/([\w-]+)\//g)].map((m) => m[1]));
    const actual = readdirSync(join(ROOT, "src")).filter((entry) =>
      statSync(join(ROOT, "src", entry)).isDirectory(),
    );
    expect([...named].sort(), "src/ folders").toEqual(actual.sort());
  });
});
