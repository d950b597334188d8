# The service's image: Node.js 24 running the TypeScript sources directly (type stripping, no
# build step), production dependencies only, as the unprivileged `node` user. docs/operations.md,
# "Containers", tells how to build, run, compose and upgrade it.

# Stage 1: the production dependencies, installed from the lock file (no dev dependencies: the
# type checker, the linter, the test tools and the `node` package are left out).
FROM node:24-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

# Stage 2: the image: those dependencies, the sources and the migrations, nothing else.
FROM node:24-slim
ENV NODE_ENV=production \
    MALLOC_ARENA_MAX=2 \
    HOST=0.0.0.0 \
    SVC_DATA_DIR=/var/lib/svc
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY package.json package-lock.json ./
COPY migrations ./migrations
COPY src ./src
# The embedded database's directory (unused with DATABASE_URL), owned by the user that runs the
# service. The code stays root's: the service cannot change it.
RUN mkdir -p /var/lib/svc && chown node:node /var/lib/svc && chmod 0700 /var/lib/svc
VOLUME ["/var/lib/svc"]
USER node
EXPOSE 8787
# The slim image has no curl: Node's fetch asks /healthz on the port the service listens on.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8787)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# What `npm start` runs, without npm in between: signals (SIGTERM) reach the service itself.
CMD ["node", "--max-semi-space-size=32", "--liftoff-only", "src/start.mjs"]
