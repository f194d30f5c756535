import { inspect } from "node:util";

/**
 * An opaque wrapper around one store's StoreLink API key.
 *
 * The value is only reachable through `reveal()`, which StoreLink clients call at the moment they
 * authenticate. Every accidental path to text (string templates, JSON.stringify, util.inspect,
 * pino serialisation) prints a placeholder, so key material cannot slip into a message or a log.
 */
export class ApiKey {
  readonly #value: string;

  constructor(value: string) {
    this.#value = value;
  }

  reveal(): string {
    return this.#value;
  }

  toString(): string {
    return "[api key]";
  }

  toJSON(): string {
    return "[api key]";
  }

  [inspect.custom](): string {
    return "[api key]";
  }
}
