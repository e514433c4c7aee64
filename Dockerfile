# syntax=docker/dockerfile:1
#
# One image for every role; the command picks it: `node dist/main/cli.js api` (default), `worker`,
# `migrate`, `start` (all-in-one). The image runs compiled JavaScript with node itself as the
# process that receives SIGTERM (exec form: no shell, npm or tsx in between), so `docker stop`
# drains the worker's jobs and the process exits 0.
#
#   docker build -t invoice-lifecycle .
#   docker run --rm -e DATABASE_URL=... -e REDIS_URL=... -p 3000:3000 invoice-lifecycle
#   docker run --rm -e DATABASE_URL=... -e REDIS_URL=... invoice-lifecycle node dist/main/cli.js worker

ARG NODE_IMAGE=node:20-bookworm-slim

# Every dependency, dev ones included (typescript and the @types packages for the build).
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund

# `npm run build`: type-checks and compiles src/ and jobs/ to dist/, with the templates and SQL
# migrations beside the compiled code. A type error fails the image build.
FROM deps AS build
COPY tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY main ./main
COPY src ./src
COPY jobs ./jobs
COPY templates ./templates
RUN npm run build

# Production dependencies only.
FROM ${NODE_IMAGE} AS prod-deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production
# Every interface of the container: the code's default (127.0.0.1) would answer no published port.
ENV HOST=0.0.0.0
WORKDIR /app
COPY --from=prod-deps /app/node_modules ./node_modules
COPY package.json package-lock.json ./
COPY --from=build /app/dist ./dist
# The code is root-owned and read-only to the app; only var/ (MAIL_OUTBOX_DIR's default, where
# emails go when no SMTP server is configured for their environment) is writable.
RUN mkdir -p var/outbox && chown -R node:node var
USER node
# API (PORT), the API's metrics (METRICS_PORT) and the worker's health/metrics port (WORKER_PORT).
EXPOSE 3000 3001 9464
CMD ["node", "dist/main/cli.js", "api"]
