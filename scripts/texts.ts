/**
 * `npm run texts`: writes the texts that restate the code's own declarations, so they are never
 * copied by hand:
 * - manifest.json's `tools` and `prompts` (the desktop bundle's), from the tools and the prompt;
 * - the tool tables of README.md and docs/tools.md, from the tools;
 * - the variable tables of docs/configuration.md, DEPLOYMENT.md, docs/logging.md and the README,
 *   from `VARIABLES` (src/config.ts).
 * In a Markdown file a generated text sits between `<!-- generated:NAME -->` and
 * `<!-- /generated:NAME -->`; everything outside the markers is written by hand.
 * test/meta/generated-texts.test.ts fails when any of them is stale.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join, posix, relative } from "node:path";
import { fileURLToPath } from "node:url";
import type { Declaration, Documented } from "../src/config/declare.js";
import { NODE_VARIABLES, VARIABLES } from "../src/config.js";
import { getPrompt, PROMPT_LIST } from "../src/mcp/prompts.js";
import type { ToolListing } from "../src/tools/define.js";
import { TOOLS } from "../src/tools/index.js";

export const ROOT = fileURLToPath(new URL("..", import.meta.url));
export const COMMAND = "npm run texts";

// --- Wording ---------------------------------------------------------------------------------

/** The sentences of `text`; "e.g." and "i.e." end none. */
export function sentences(text: string): string[] {
  return text.split(/(?<!\b(?:e\.g|i\.e)\.)(?<=\.)\s+/);
}

const firstSentences = (text: string, count: number): string =>
  sentences(text).slice(0, count).join(" ");

/** Table cells are one line, and a `|` would end the cell. */
const cell = (text: string): string => text.replace(/\s*\n\s*/g, " ").replace(/\|/g, "\\|");

function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const line = (cells: readonly string[]) => `| ${cells.map(cell).join(" | ")} |`;
  return [line(header), line(header.map(() => "---")), ...rows.map(line)].join("\n");
}

/**
 * Links in declarations are written from the project root (`docs/keys.md#x`); on a page they
 * must be relative to its folder.
 */
function linksFrom(page: string, text: string): string {
  return text.replace(/\]\(([^)\s#:]+)(#[^)\s]*)?\)/g, (_all, target: string, anchor = "") => {
    const path = relative(dirname(page), target).split("\\").join(posix.sep);
    return `](${path}${anchor})`;
  });
}

// --- The tools --------------------------------------------------------------------------------

const listings: readonly ToolListing[] = TOOLS.map((tool) => tool.listing);

const kindOf = (listing: ToolListing): string =>
  listing.annotations.readOnlyHint === true ? "read" : "**write**";

interface JsonSchema {
  type?: string;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
}

/** The object a tool answers with when it succeeds: the first branch of its output schema. */
const resultSchemaOf = (listing: ToolListing): JsonSchema => {
  const schema = listing.outputSchema as JsonSchema;
  return schema.anyOf?.[0] ?? schema;
};

/** `` `sku`, `store_ids[]`, optional `dry_run` `` */
function inputsOf(listing: ToolListing): string {
  const schema = listing.inputSchema as JsonSchema;
  const required = new Set(schema.required ?? []);
  return Object.entries(schema.properties ?? {})
    .map(([name, property]) => {
      const shown = `\`${name}${property.type === "array" ? "[]" : ""}\``;
      return required.has(name) ? shown : `optional ${shown}`;
    })
    .join(", ");
}

/** `` `{ query, matches, hint? }` `` */
function resultOf(listing: ToolListing): string {
  const schema = resultSchemaOf(listing);
  const required = new Set(schema.required ?? []);
  const fields = Object.keys(schema.properties ?? {}).map((name) =>
    required.has(name) ? name : `${name}?`,
  );
  return `\`{ ${fields.join(", ")} }\``;
}

/** A description is plain text for the model: on a page, `<store>` must not read as HTML. */
const prose = (text: string): string => text.replace(/</g, "\\<");

/** The order the tools are called in, as names.ts declares it (the descriptions say it too). */
const callOrder = (): string =>
  `Call order: ${listings.map((l) => `\`${l.name}\``).join(" → ")}.\n\n`;

const readmeTools = (): string =>
  callOrder() +
  table(
    ["Tool", "Kind", "What it does"],
    listings.map((l) => [`\`${l.name}\``, kindOf(l), prose(firstSentences(l.description, 1))]),
  );

const docsTools = (): string =>
  table(
    ["Tool", "Kind", "Inputs", "Returns"],
    listings.map((l) => [`\`${l.name}\``, kindOf(l), inputsOf(l), resultOf(l)]),
  );

// --- The variables ----------------------------------------------------------------------------

const declared = Object.entries(VARIABLES) as [string, Declaration][];
const documented: [string, Documented][] = [...declared, ...Object.entries(NODE_VARIABLES)];

/** The default as the tables show it: the schema's own, or "unset". */
function defaultOf(variable: Documented): string {
  if (variable.shownDefault !== undefined) return `\`${variable.shownDefault}\``;
  if (!("schema" in variable)) return "unset";
  const parsed = (variable as Declaration).schema.safeParse(undefined);
  const value: unknown = parsed.success ? parsed.data : undefined;
  if (value === undefined || (Array.isArray(value) && value.length === 0)) return "unset";
  return `\`${String(value)}\``;
}

const configurationVariables = (page: string): string =>
  table(
    ["Variable", "Default", "Meaning"],
    documented.map(([name, v]) => [`\`${name}\``, defaultOf(v), linksFrom(page, v.doc)]),
  );

const deploymentVariables = (page: string): string =>
  table(
    ["Variable", "On Cloud Run", "Notes"],
    documented.map(([name, v]) => [
      `\`${name}\``,
      linksFrom(page, v.cloudRun),
      linksFrom(page, v.cloudRunNote ?? ""),
    ]),
  );

/** A page's own short table: the variables whose declaration lists it there. */
const listedVariables =
  (sentenceCount: number) =>
  (page: string): string =>
    table(
      ["Variable", "Default", "What it does"],
      documented
        .filter(([, v]) => v.listedIn?.some((listed) => listed === page))
        .map(([name, v]) => [
          `\`${name}\``,
          defaultOf(v),
          linksFrom(page, firstSentences(v.doc, sentenceCount)),
        ]),
    );

// --- The manifest -----------------------------------------------------------------------------

/** What manifest.json's `tools` and `prompts` say: the tools' and the prompt's own words. */
export function manifestEntries(): { tools: unknown[]; prompts: unknown[] } {
  // mcpb fills `${arguments.NAME}` with what the user typed when the prompt is used.
  const placeholders = Object.fromEntries(
    PROMPT_LIST.prompts.flatMap((p) => p.arguments.map((a) => [a.name, `\${arguments.${a.name}}`])),
  );
  return {
    tools: listings.map((l) => ({ name: l.name, description: firstSentences(l.description, 2) })),
    prompts: PROMPT_LIST.prompts.map((prompt) => {
      const got = getPrompt({ name: prompt.name, arguments: placeholders });
      const content = got.messages[0]?.content;
      return {
        name: prompt.name,
        description: prompt.description,
        arguments: prompt.arguments.map((a) => a.name),
        text: content?.type === "text" ? content.text : "",
      };
    }),
  };
}

/**
 * JSON as the formatter (Biome, 100 columns) writes it: objects one key a line, an array of plain
 * values on one line when the line fits.
 */
function formatJson(value: unknown, indent = "", prefix = 0): string {
  const inner = `${indent}  `;
  if (Array.isArray(value)) {
    if (value.length === 0) return "[]";
    if (value.every((item) => item === null || typeof item !== "object")) {
      const flat = `[${value.map((item) => JSON.stringify(item)).join(", ")}]`;
      if (prefix + flat.length + 1 <= 100) return flat;
    }
    const items = value.map((item) => inner + formatJson(item, inner, inner.length));
    return `[\n${items.join(",\n")}\n${indent}]`;
  }
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value);
    if (entries.length === 0) return "{}";
    const lines = entries.map(([key, item]) => {
      const head = `${inner}${JSON.stringify(key)}: `;
      return head + formatJson(item, inner, head.length);
    });
    return `{\n${lines.join(",\n")}\n${indent}}`;
  }
  return JSON.stringify(value);
}

function manifest(current: string): string {
  const parsed = JSON.parse(current) as Record<string, unknown>;
  const { tools, prompts } = manifestEntries();
  return `${formatJson({ ...parsed, tools, prompts })}\n`;
}

// --- The pages --------------------------------------------------------------------------------

/** Each generated text of each page, by marker name. */
const SECTIONS: Record<string, Record<string, (page: string) => string>> = {
  "README.md": { tools: readmeTools, settings: listedVariables(1) },
  "docs/logging.md": { variables: listedVariables(Number.POSITIVE_INFINITY) },
  "docs/tools.md": { tools: docsTools },
  "docs/configuration.md": { variables: configurationVariables },
  "DEPLOYMENT.md": { variables: deploymentVariables },
};

const opening = (name: string) => `<!-- generated:${name} -->`;
const closing = (name: string) => `<!-- /generated:${name} -->`;

/** `current` with the text between each pair of markers written afresh. */
function page(file: string, current: string): string {
  let text = current;
  for (const [name, render] of Object.entries(SECTIONS[file] ?? {})) {
    const start = text.indexOf(opening(name));
    const end = text.indexOf(closing(name));
    if (start === -1 || end < start) {
      throw new Error(`${file} lacks the markers ${opening(name)} ... ${closing(name)}`);
    }
    const body = `\n\n${render(file)}\n\n`;
    text = text.slice(0, start + opening(name).length) + body + text.slice(end);
  }
  const unknown = [...text.matchAll(/<!-- generated:([\w-]+) -->/g)]
    .map((m) => m[1] as string)
    .filter((name) => !(name in (SECTIONS[file] ?? {})));
  if (unknown.length > 0) throw new Error(`${file}: no generator for ${unknown.join(", ")}`);
  return text;
}

/** Every generated file: its path from the root, and its text as `npm run texts` writes it. */
export function generatedTexts(
  read: (file: string) => string = (file) => readFileSync(join(ROOT, file), "utf8"),
): { file: string; text: string }[] {
  return [
    { file: "manifest.json", text: manifest(read("manifest.json")) },
    ...Object.keys(SECTIONS).map((file) => ({ file, text: page(file, read(file)) })),
  ];
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  for (const { file, text } of generatedTexts()) {
    const before = readFileSync(join(ROOT, file), "utf8");
    if (before !== text) {
      writeFileSync(join(ROOT, file), text);
      process.stderr.write(`${COMMAND}: wrote ${file}\n`);
    }
  }
}
