# syntax=docker/dockerfile:1
# One image for both roles: `docker run IMAGE gateway` (default) or `docker run IMAGE operator`.
# Node 24 LTS (.node-version names the release CI runs). Build: compile TypeScript to dist/. Runtime: production dependencies only, non-root, read-only friendly.

FROM node:24-bookworm-slim AS build
WORKDIR /app
# .node-version and tools/require-node.mjs: npm ci's preinstall check that Node is new enough.
COPY package.json package-lock.json .node-version ./
COPY tools/require-node.mjs ./tools/
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY operator ./operator
COPY crds ./crds
# The Lua scripts are loaded from beside the compiled module (src/billing/scripts.ts).
RUN npm run build \
 && mkdir -p dist/src/billing/lua \
 && cp src/billing/lua/*.lua dist/src/billing/lua/

FROM node:24-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force

FROM node:24-bookworm-slim AS runtime
ENV NODE_ENV=production \
    HOST=0.0.0.0
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
# The CRD is the catalog schema's source of truth (read at start); the example catalog serves local runs.
COPY crds ./crds
COPY examples ./examples
# The schema migrations: plain SQL the compiled migrate.js reads from here (tsc copies no .sql).
COPY src/record/migrations ./src/record/migrations
# Numeric ids so Kubernetes can verify runAsNonRoot; nothing in /app is writable by it.
USER 10001:10001
EXPOSE 8080 9090
# exec: node is PID 1 and gets SIGTERM directly (both roles shut down gracefully on it).
# --max-semi-space-size=16: V8 on Node 24 grows its young generation to 64 MB semi-spaces where it sees
# gigabytes of memory, 100 MB more RSS under load for no CPU the A/B could show (docs/performance.md,
# issue 41); 16 MB is what Node 20 took. bench/targets.ts runs the bench's gateways with the same flags.
ENTRYPOINT ["/bin/sh", "-c", "case \"$1\" in gateway) exec node --max-semi-space-size=16 dist/src/gateway-main.js ;; operator) exec node dist/operator/main.js ;; migrate) exec node dist/src/record/migrate-cli.js ;; *) echo \"usage: gateway | operator | migrate (got: $1)\" >&2; exit 64 ;; esac", "tollgate"]
CMD ["gateway"]
