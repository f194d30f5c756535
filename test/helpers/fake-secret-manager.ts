import type { SecretAccessClient } from "../../src/keys/secret-manager.js";

/** A gRPC-shaped error as @google-cloud/secret-manager throws it: numeric `code`, raw details. */
export function grpcError(code: number, details: string): Error {
  return Object.assign(new Error(`${code} ${details}`), { code, details, metadata: {} });
}

/**
 * A fake Secret Manager client: secrets by full version name, each access recorded. `failWith`
 * makes every access reject; `hang` makes it never settle (for the deadline). `faults` does either
 * for one secret name only: an error to reject with, or a delay before answering (slowness).
 */
export class FakeSecretManager implements SecretAccessClient {
  readonly secrets = new Map<string, Uint8Array | string>();
  readonly calls: { name: string; options: { timeout?: number } | undefined }[] = [];
  failWith: Error | undefined;
  hang = false;
  readonly faults = new Map<string, Error | { delayMs: number }>();

  async accessSecretVersion(
    request: { name: string },
    options?: { timeout?: number },
  ): Promise<readonly [{ payload: { data: Uint8Array | string } }, undefined, undefined]> {
    this.calls.push({ name: request.name, options });
    if (this.hang) return new Promise(() => {});
    if (this.failWith) throw this.failWith;
    const fault = this.faults.get(request.name);
    if (fault instanceof Error) throw fault;
    if (fault) await new Promise((resolve) => setTimeout(resolve, fault.delayMs));
    const data = this.secrets.get(request.name);
    if (data === undefined) {
      throw grpcError(5, `Secret [${request.name}] not found or has no versions.`);
    }
    return [{ payload: { data } }, undefined, undefined];
  }
}
