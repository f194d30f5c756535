import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { composeDeps } from "../../src/deps.js";
import { stateSigner } from "../../src/policy/request-state.js";
import { MapKeyProvider } from "../helpers/harness.js";

/**
 * Rolling KORRAL_REQUEST_STATE_KEY: a replica with the new key and the old one as
 * KORRAL_REQUEST_STATE_KEY_PREVIOUS accepts a buyer's answer to state the old key signed.
 */
const OLD = "old-request-state-key-0123456789abcdef";
const NEW = "new-request-state-key-0123456789abcdef";
const STATE = { nonce: "n-1", args: "digest" };

describe("request-state key rotation", () => {
  it("state signed with the old key is accepted by a replica holding it as the previous key", async () => {
    const before = stateSigner(OLD);
    const rolled = stateSigner(NEW, OLD);
    const wire = await before.mint(STATE, "caller-a");
    const state = await rolled.verify(wire);
    expect(state).toMatchObject(STATE);
    expect(rolled.isCaller(state, "caller-a")).toBe(true);
    // Without the previous key, the same state is refused: the variable is what carries the roll.
    await expect(stateSigner(NEW).verify(wire)).rejects.toThrow();
  });

  it("the previous key only checks: new state is signed with the new key", async () => {
    const rolled = stateSigner(NEW, OLD);
    const wire = await rolled.mint(STATE, "caller-a");
    await expect(stateSigner(NEW).verify(wire)).resolves.toMatchObject(STATE);
    await expect(stateSigner(OLD).verify(wire)).rejects.toThrow();
  });

  it("tampered state is refused under both keys", async () => {
    const rolled = stateSigner(NEW, OLD);
    const wire = await stateSigner(OLD).mint(STATE, "caller-a");
    // One character changed inside the signature, not its last: the last base64url character
    // carries padding bits, and a change there can decode to the same bytes.
    const at = wire.length - 5;
    const tampered = `${wire.slice(0, at)}${wire[at] === "A" ? "B" : "A"}${wire.slice(at + 1)}`;
    expect(tampered).not.toBe(wire);
    await expect(rolled.verify(tampered)).rejects.toThrow();
  });

  it("is configured from KORRAL_REQUEST_STATE_KEY_PREVIOUS, at least 32 bytes", async () => {
    expect(() => loadConfig({ KORRAL_REQUEST_STATE_KEY_PREVIOUS: "short" })).toThrow(
      /KORRAL_REQUEST_STATE_KEY_PREVIOUS: must be at least 32 bytes/,
    );
    const config = loadConfig({
      KORRAL_REQUEST_STATE_KEY: NEW,
      KORRAL_REQUEST_STATE_KEY_PREVIOUS: OLD,
    });
    const deps = composeDeps({ keys: new MapKeyProvider() }, config);
    const wire = await stateSigner(OLD).mint(STATE, "caller-a");
    await expect(deps.signer.verify(wire)).resolves.toMatchObject(STATE);
  });
});
