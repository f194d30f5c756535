import { existsSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { runOk } from "./spawn.js";

/** The official Python MCP client this project is tested against. */
export const PYTHON_MCP = "mcp==2.3.0";

const VENV = fileURLToPath(
  new URL("../../node_modules/.cache/korral-python-mcp-2.3.0", import.meta.url),
);

/**
 * A venv with the official Python MCP client, made once per checkout (under node_modules, so a
 * fresh `npm ci` makes it anew); returns its python. pip installs from the machine's package
 * store; `--retries 0` stops it waiting on an index it cannot reach.
 */
export async function pythonWithMcp(): Promise<string> {
  const python = join(VENV, "bin", "python");
  const ready = join(VENV, ".installed");
  if (!existsSync(ready)) {
    await runOk("python3", ["-m", "venv", "--clear", VENV], { timeoutMs: 120_000 });
    await runOk(python, ["-m", "pip", "install", "--quiet", "--retries", "0", PYTHON_MCP], {
      timeoutMs: 240_000,
    });
    await runOk(python, ["-c", `open(r'''${ready}''', 'w').close()`]);
  }
  return python;
}

export const PYTHON_CLIENT = fileURLToPath(new URL("../interop/python/client.py", import.meta.url));
