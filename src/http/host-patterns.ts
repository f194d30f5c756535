/**
 * The Host patterns' grammar lives with the configuration, which refuses a bad
 * KORRAL_ALLOWED_HOSTS entry at start; the transport matches Host headers with the same rules.
 */
export {
  hostAllowedBy,
  hostnameOf,
  hostPatternProblem,
  isLoopbackHost,
  LOOPBACK_HOSTS,
} from "../config/host-patterns.js";
