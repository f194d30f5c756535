# syntax=docker/dockerfile:1
# Korral StoreLink MCP, streamable HTTP, for Cloud Run. See DEPLOYMENT.md.
# test/deploy/ parses this file and rehearses the runtime stage without Docker: keep them in step.

# --- build: the full toolchain compiles TypeScript to dist/ ---
FROM node:22-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
# esbuild compiles src/ to dist/ (shared chunks: a shorter cold start); CI type-checks.
COPY scripts/bundle.mjs scripts/node-bundle.mjs ./scripts/
RUN npm run build

# --- runtime: production dependencies and compiled code only ---
FROM node:22-bookworm-slim AS runtime
ENV NODE_ENV=production HOST=0.0.0.0 PORT=8080
WORKDIR /app
# tini (Debian's package) runs as PID 1 with node as its child; see the ENTRYPOINT below.
RUN apt-get update && apt-get install -y --no-install-recommends tini \
  && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
# No install scripts run: none of the production dependencies needs one to work.
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
# The code stays root-owned, read-only to the server; only the log directory is writable.
RUN mkdir -p /app/log && chown node:node /app/log
# Node's compile cache: the service is started once here, exactly as the CMD starts it and as the
# user it runs as (the cache is kept per V8 flag set and per user id), so every start on Cloud
# Run reads compiled code instead of compiling it (about 60 ms of a start: docs/performance.md).
# Then root-owned, readable by all and writable by none, like the code it stands for (Node writes
# its entries 0600: without a+r the server could not read them, and would say nothing). No
# network: the warm-up's start must need none.
ENV NODE_COMPILE_CACHE=/app/.compile-cache
COPY scripts/warm-compile-cache.mjs ./scripts/
RUN --network=none mkdir -p /app/.compile-cache && chown node:node /app/.compile-cache \
  && setpriv --reuid=node --regid=node --init-groups \
    node scripts/warm-compile-cache.mjs node --min-semi-space-size=8 --max-semi-space-size=8 --no-allocation-site-pretenuring dist/http.js \
  && chown -R root:root /app/.compile-cache && chmod -R a+rX,a-w /app/.compile-cache
USER node
EXPOSE 8080
# Stopping (DEPLOYMENT.md, "Stopping"): tini is PID 1, passes every signal on to node and exits
# with node's status. node must not be PID 1: the kernel drops a SIGKILL sent to a PID namespace's
# init from inside it, so node's exit watchdog could not end an exit hung on a stuck read.
# Exec form: node receives Cloud Run's SIGTERM from tini itself (npm would swallow it).
ENTRYPOINT ["/usr/bin/tini", "--"]
# A fixed 8 MB young generation: V8's default grows each semi-space from 1 to 16 MB, which costs
# scavenges while the modules load and ~15 MB of RSS under load. No allocation-site pretenuring:
# requests are slow while the code warms up, so V8 may judge their objects long-lived and
# allocate them old from then on, and everything they point to is then promoted too (about one
# start in three stayed so, a quarter slower). See docs/performance.md; `npm run start:http` and
# `npm run bench` run this same command.
CMD ["node", "--min-semi-space-size=8", "--max-semi-space-size=8", "--no-allocation-site-pretenuring", "dist/http.js"]
