import { ResourceNotFoundError, type Server } from "@modelcontextprotocol/server";
import { z } from "zod";
import { directoryOf } from "../tools/common.js";
import type { Deps } from "../tools/define.js";
import { LIST_PARAMS } from "./list-params.js";
import { onRequest } from "./protocol-error.js";

export const STORES_URI = "korral://stores";

const STORES_RESOURCE = {
  uri: STORES_URI,
  name: "stores",
  title: "Korral store directory",
  description:
    "Every Korral store with its id and name, so a place the buyer names resolves to store ids " +
    '(e.g. "Brno" is 47 and 63) without guessing.',
  mimeType: "application/json",
};

export const RESOURCE_LIST = { resources: [STORES_RESOURCE] };
export const RESOURCE_TEMPLATE_LIST = { resourceTemplates: [] };

/**
 * resources/read, for both protocol eras: the live store directory, or the SDK's resource-not-found
 * error (-32602 with the uri, as the SDK v2 answers it in every revision).
 */
export async function readResource(deps: Deps, uri: string) {
  if (uri !== STORES_URI) {
    throw new ResourceNotFoundError(uri, `Unknown resource ${uri}. Available: ${STORES_URI}`);
  }
  // Scrubbed of every key this process has sent, as the tools' directory is.
  const stores = await directoryOf(deps.storelink);
  return {
    contents: [{ uri: STORES_URI, mimeType: "application/json", text: JSON.stringify({ stores }) }],
  };
}

/** The store directory as an MCP resource, read live from StoreLink's directory (no key needed). */
export function registerResources(server: Server, deps: Deps): void {
  onRequest(server, "resources/list", LIST_PARAMS, () => RESOURCE_LIST);
  // No templates, but declaring `resources` promises this method: Inspector, the SDK v2 client
  // and the Python SDK call it and report -32601 as a failure.
  onRequest(server, "resources/templates/list", LIST_PARAMS, () => RESOURCE_TEMPLATE_LIST);
  onRequest(server, "resources/read", READ_PARAMS, (params) => readResource(deps, params.uri));
}

const READ_PARAMS = z.looseObject({ uri: z.string() });
