import { existsSync, readFileSync, realpathSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { runSyncOk } from "../helpers/spawn.js";

/**
 * Every gcloud command the deploy guide tells an operator to run exists in the installed Cloud
 * SDK, with every flag it passes: checked against the SDK's own static CLI tree
 * (data/cli/gcloud_completions.py), without running gcloud or reaching Google Cloud. Skipped where
 * no Cloud SDK is installed.
 */
const ROOT = join(import.meta.dirname, "../..");
const DOCS = ["DEPLOYMENT.md", "docs/logging.md"];

interface Node {
  commands: Record<string, Node>;
  flags: Record<string, unknown>;
}

function cliTree(): Node | undefined {
  let gcloud: string;
  try {
    gcloud = realpathSync(runSyncOk("which", ["gcloud"]).trim());
  } catch {
    return undefined;
  }
  const file = join(dirname(dirname(gcloud)), "data/cli/gcloud_completions.py");
  if (!existsSync(file)) return undefined;
  const text = readFileSync(file, "utf8");
  return JSON.parse(text.slice(text.indexOf("= {") + 2)) as Node;
}

/** The gcloud invocations of a document's bash blocks: continuations folded, pipes split. */
function gcloudCommands(markdown: string): string[] {
  const commands: string[] = [];
  for (const [, block = ""] of markdown.matchAll(/```bash\n([\s\S]*?)```/g)) {
    for (const line of block.replace(/\\\n\s*/g, " ").split("\n")) {
      for (const [, inner = ""] of line.matchAll(/\$\((gcloud [^)]*)\)/g)) commands.push(inner);
      for (const part of line.replace(/\$\(gcloud [^)]*\)/g, "X").split(/&&|\|/)) {
        const trimmed = part.trim();
        if (trimmed.startsWith("gcloud ")) commands.push(trimmed);
      }
    }
  }
  return commands;
}

/** The command group path (`run deploy`) and the flags (`--region`) of one invocation. */
function parse(tree: Node, command: string): { path: string[]; flags: string[]; node?: Node } {
  const words = command.split(/\s+/).slice(1);
  const path: string[] = [];
  let node: Node | undefined = tree;
  for (const word of words) {
    const next: Node | undefined = node?.commands[word];
    if (!next) break;
    path.push(word);
    node = next;
  }
  const flags = [...command.matchAll(/(?<=\s)(--[a-z][a-z0-9-]*)/g)].map((m) => m[1] as string);
  return { path, flags, ...(node ? { node } : {}) };
}

const tree = cliTree();

describe.runIf(tree !== undefined)(
  "the deploy guide's gcloud commands, in the installed SDK",
  () => {
    const root = tree as Node;

    it.each(DOCS)("every command and flag of %s exists", (file) => {
      const commands = gcloudCommands(readFileSync(join(ROOT, file), "utf8"));
      expect(commands.length).toBeGreaterThan(0);
      const wrong: string[] = [];
      for (const command of commands) {
        const { path, flags, node } = parse(root, command);
        if (!node || Object.keys(node.commands).length > 0) {
          wrong.push(`no such command: ${command.slice(0, 80)}`);
          continue;
        }
        for (const flag of flags) {
          const known =
            flag in node.flags ||
            flag in root.flags ||
            (flag.startsWith("--no-") && `--${flag.slice(5)}` in node.flags);
          if (!known) wrong.push(`gcloud ${path.join(" ")}: no flag ${flag}`);
        }
      }
      expect(wrong).toEqual([]);
    });

    it("finds a wrong flag and a wrong command (the check can fail)", () => {
      expect(parse(root, "gcloud run deploy svc --region=x").node?.flags).toHaveProperty(
        "--region",
      );
      expect(parse(root, "gcloud run deploy svc --regoin=x").node?.flags).not.toHaveProperty(
        "--regoin",
      );
      expect(Object.keys(parse(root, "gcloud run deplyo svc").node?.commands ?? {})).not.toEqual(
        [],
      );
    });
  },
);
