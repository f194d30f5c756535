import { inspect } from "node:util";

/**
 * A key travels in the `X-StoreLink-Key` header, so it must be a string every hop carries byte
 * for byte: visible ASCII (0x21-0x7E), nothing else. fetch refuses CR, LF, NUL and anything above
 * U+00FF outright (it throws before connecting); U+0080-U+00FF would go out as single Latin-1
 * bytes, i.e. not the UTF-8 the operator saved; spaces and tabs are legal but trimmed or folded
 * by proxies, and inside a key they are a paste error. StoreLink keys are tokens (slk_<store>_..).
 * Sources trim surrounding whitespace first (a secret saved with a trailing newline is fine).
 */
const SENDABLE_KEY = /^[\x21-\x7e]+$/;

export const isSendableKey = (value: string): boolean => SENDABLE_KEY.test(value);

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
