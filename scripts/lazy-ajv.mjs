// Bundled in place of the SDK's Ajv provider (see bundle.mjs). The SDK's `Server` imports Ajv
// statically only to build a default validator; this service always passes its own, and needs
// JSON Schema validation only for elicitation answers over stdio. So Ajv is never part of the
// start: it is loaded from node_modules, synchronously, the first time a
// validator is asked for, through the SDK's own CommonJS build of the same provider.
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
let Provider;

export class AjvJsonSchemaValidator {
  #inner;

  getValidator(schema) {
    Provider ??= require("@modelcontextprotocol/sdk/validation/ajv").AjvJsonSchemaValidator;
    this.#inner ??= new Provider();
    return this.#inner.getValidator(schema);
  }
}
