import type {
  OAuthClientMetadata,
  OAuthClientProvider,
  OAuthDiscoveryState,
  StoredOAuthClientInformation,
  StoredOAuthTokens,
} from "@modelcontextprotocol/client";

/**
 * The buyer's side of authorization code + PKCE for the SDK clients: an in-memory
 * OAuthClientProvider (what a desktop client keeps) and a "browser" that follows the test AS's
 * redirects with a cookie jar, signs in by posting its login form, and stops at the redirect URI.
 */

/** Never bound: the code is read off the redirect. */
export const CALLBACK = "http://127.0.0.1:8976/callback";

export const CLIENT_METADATA: OAuthClientMetadata = {
  client_name: "Buyer desktop MCP client (test)",
  redirect_uris: [CALLBACK],
  grant_types: ["authorization_code", "refresh_token"],
  response_types: ["code"],
  token_endpoint_auth_method: "none",
};

export class MemoryProvider implements OAuthClientProvider {
  #client: StoredOAuthClientInformation | undefined;
  #tokens: StoredOAuthTokens | undefined;
  #verifier = "";
  #discovery: OAuthDiscoveryState | undefined;
  /** The last authorization URL the SDK sent the buyer to. */
  authorizationUrl: URL | undefined;

  get redirectUrl(): string {
    return CALLBACK;
  }
  get clientMetadata(): OAuthClientMetadata {
    return CLIENT_METADATA;
  }
  clientInformation() {
    return this.#client;
  }
  saveClientInformation(info: StoredOAuthClientInformation) {
    this.#client = info;
  }
  tokens() {
    return this.#tokens;
  }
  saveTokens(tokens: StoredOAuthTokens) {
    this.#tokens = tokens;
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(verifier: string) {
    this.#verifier = verifier;
  }
  codeVerifier() {
    return this.#verifier;
  }
  saveDiscoveryState(state: OAuthDiscoveryState) {
    this.#discovery = state;
  }
  discoveryState() {
    return this.#discovery;
  }
  invalidateCredentials(scope: "all" | "client" | "tokens" | "verifier" | "discovery") {
    if (scope === "all" || scope === "client") this.#client = undefined;
    if (scope === "all" || scope === "tokens") this.#tokens = undefined;
  }
}

/** The buyer's browser: follows the AS's redirects, signs in as `login`, stops at CALLBACK. */
export function browserFor(login: string) {
  const jar = new Map<string, string>();
  const cookie = () => [...jar].map(([k, v]) => `${k}=${v}`).join("; ");
  return async function authorize(authorizationUrl: URL): Promise<URLSearchParams> {
    let next = new URL(authorizationUrl);
    let init: RequestInit = {};
    for (let hop = 0; hop < 20; hop++) {
      const res = await fetch(next, {
        redirect: "manual",
        ...init,
        headers: { ...(init.headers as Record<string, string>), cookie: cookie() },
      });
      for (const line of res.headers.getSetCookie()) {
        const pair = line.split(";", 1)[0] ?? "";
        const eq = pair.indexOf("=");
        if (eq > 0) jar.set(pair.slice(0, eq).trim(), pair.slice(eq + 1).trim());
      }
      init = {};
      if (res.status >= 300 && res.status < 400) {
        const to = new URL(res.headers.get("location") ?? "", next);
        if (to.href.startsWith(CALLBACK)) return to.searchParams;
        next = to;
        continue;
      }
      const body = await res.text();
      const form = /<form method="post" action="([^"]+)"/.exec(body);
      if (res.status !== 200 || !form) throw new Error(`unexpected ${res.status} at ${next}`);
      next = new URL(form[1] ?? "", next);
      init = {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ login }).toString(),
      };
    }
    throw new Error("no callback after 20 hops");
  };
}
