import { isIP } from "node:net";

/** Loopback host names: enforced whenever the server listens on loopback. */
export const LOOPBACK_HOSTS: readonly string[] = ["localhost", "127.0.0.1", "[::1]"];

export const hostnameOf = (hostOrOrigin: string): string | undefined => {
  try {
    return new URL(hostOrOrigin.includes("://") ? hostOrOrigin : `http://${hostOrOrigin}`).hostname;
  } catch {
    return undefined;
  }
};

/** One trailing dot is the same DNS name (`host.` = `host`); the comparison ignores it. */
const withoutRootDot = (hostname: string): string =>
  hostname.endsWith(".") ? hostname.slice(0, -1) : hostname;

/**
 * Whether a listen address is on loopback, however it is spelled: every address of 127.0.0.0/8
 * (`127.1`, `0x7f.0.0.1`, `2130706433` as the resolver reads them), `::1` in any form, an
 * IPv4-mapped loopback (`::ffff:127.0.0.1`), and `localhost` names.
 */
export function isLoopbackHost(host: string): boolean {
  const name = withoutRootDot(host.toLowerCase());
  if (name === "localhost" || name.endsWith(".localhost")) return true;
  let hostname: string;
  try {
    // The WHATWG parser writes every IPv4 and IPv6 spelling in one canonical form.
    hostname = new URL(`http://${bracketIpv6(name)}/`).hostname;
  } catch {
    return false;
  }
  if (isIP(hostname) === 4) return hostname.startsWith("127.");
  return hostname === "[::1]" || /^\[::ffff:7f[0-9a-f]{2}:[0-9a-f]{1,4}\]$/.test(hostname);
}

/** A bare IPv6 address (`::1`) is written with brackets in a Host header and in URL hostnames. */
const bracketIpv6 = (entry: string): string =>
  !entry.startsWith("[") && (entry.match(/:/g)?.length ?? 0) > 1 ? `[${entry}]` : entry;

/** An exact entry: a DNS name or IPv4 address, or a bracketed IPv6 address; optionally a port. */
const EXACT_HOST = /^(?:[a-z0-9_.-]+|\[[0-9a-f:.]+\])(?::\d{1,5})?$/;

/** What `*` stands for in a host pattern: exactly one DNS label, or part of one. Never a dot. */
const LABEL_PART = /^[a-z0-9-]+$/;

/**
 * Shared domains where every sub-domain (or Cloud Run tag label) is someone else's service: a
 * wildcard under one of these would accept any tenant's host. Listed names must be exact.
 */
const SHARED_DOMAINS = [
  "run.app",
  "appspot.com",
  "cloudfunctions.net",
  "web.app",
  "firebaseapp.com",
  "googleusercontent.com",
  "herokuapp.com",
  "github.io",
  "vercel.app",
  "netlify.app",
  "azurewebsites.net",
  "amazonaws.com",
  "cloudfront.net",
  "workers.dev",
  "pages.dev",
  "ngrok.io",
  "ngrok-free.app",
  "nip.io",
  "sslip.io",
];
// Second-level public suffixes (co.uk, com.au, ...) are one label under a country code.
const PUBLIC_SECOND_LEVEL = /^(co|com|net|org|gov|edu|ac|or|ne|go)\.[a-z]{2}$/;

const isUnder = (name: string, domain: string): boolean =>
  name === domain || name.endsWith(`.${domain}`);

/**
 * Why a `KORRAL_ALLOWED_HOSTS` entry is refused, or undefined when it is fine. Forms:
 * - `host` (exact; a port is ignored);
 * - `*.domain`: one more label in front of `domain`, never `domain` itself;
 * - `*---label.domain`: a Cloud Run revision tag in front of the service's own label
 *   (`<tag>---<service>-<hash>-<region>.a.run.app`).
 * A wildcard must not cover a shared or public domain (`*.run.app`, `*.com`, `*`).
 */
export function hostPatternProblem(entry: string): string | undefined {
  // As a Host header is matched: `*.com.` is `*.com`, and is judged as such.
  const lower = withoutRootDot(entry.toLowerCase());
  if (lower.startsWith(".")) {
    return `is not a host name: write *${lower} for its sub-domains (and list ${lower.slice(1)} too if it is meant)`;
  }
  if (!lower.startsWith("*")) {
    if (lower.includes("*")) return "has * in the middle: only a leading *. or *--- is supported";
    const exact = bracketIpv6(lower);
    return EXACT_HOST.test(exact) && hostnameOf(exact) !== undefined
      ? undefined
      : "is not a host name";
  }
  const tagForm = lower.startsWith("*---");
  const rest = lower.slice(tagForm ? 4 : 2);
  if (!tagForm && !lower.startsWith("*.")) {
    return "is too broad: a wildcard must be *.domain or *---service-label.domain";
  }
  if (rest.includes("*") || hostnameOf(rest) !== rest) {
    return "is not a host pattern: * may appear once, at the start, followed by a host name";
  }
  const labels = rest.split(".");
  // The part after `*.` (or the domain after the tag's label) must not be a shared or public suffix.
  const domain = tagForm ? labels.slice(1).join(".") : rest;
  const domainLabels = tagForm ? labels.length - 1 : labels.length;
  if (
    domainLabels < 2 ||
    PUBLIC_SECOND_LEVEL.test(domain) ||
    (!tagForm && SHARED_DOMAINS.some((shared) => isUnder(domain, shared)))
  ) {
    return `is too broad: it matches hosts under ${domain} that are not this service's; list exact names instead`;
  }
  if (tagForm && !(labels[0] ?? "").includes("-")) {
    // A Cloud Run service label is `<service>-<hash>-<region>` or `<service>-<project-number>`.
    return "is too broad: after *--- give the service's whole label, e.g. *---korral-storelink-abc123-lm.a.run.app";
  }
  return undefined;
}

type HostMatcher = (hostname: string) => boolean;

/** A matcher for one entry already accepted by `hostPatternProblem` (configuration time). */
function matcherFor(entry: string): HostMatcher {
  const lower = entry.toLowerCase();
  if (lower.startsWith("*---") || lower.startsWith("*.")) {
    const suffix = withoutRootDot(lower.slice(1));
    return (hostname) =>
      hostname.endsWith(suffix) && LABEL_PART.test(hostname.slice(0, -suffix.length));
  }
  const exact = withoutRootDot(hostnameOf(lower) ?? lower);
  return (hostname) => hostname === exact;
}

/**
 * Whether a Host header names an allowed host: its hostname (port dropped, lower-cased, one
 * trailing dot ignored) equals an exact entry or matches a pattern.
 */
export function hostAllowedBy(allowedHosts: readonly string[]): (header: string) => boolean {
  const matchers = allowedHosts.map((entry) => matcherFor(bracketIpv6(entry)));
  return (header) => {
    const hostname = hostnameOf(header);
    if (hostname === undefined || hostname === "") return false;
    const name = withoutRootDot(hostname);
    return matchers.some((matches) => matches(name));
  };
}
