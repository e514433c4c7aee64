# syntax=docker/dockerfile:1
#
# One image for every role; the command picks it: `npm run api` (default), `npm run worker`,
# `npm run migrate`, `npm start` (all-in-one). tsx (a production dependency) runs the TypeScript
# sources directly, so there is no compiled output to copy: the image ships main/, src/, jobs/
# and templates/ with production dependencies only.
#
#   docker build -t invoice-lifecycle .
#   docker run --rm -e DATABASE_URL=... -e REDIS_URL=... -p 3000:3000 invoice-lifecycle

ARG NODE_IMAGE=node:20-bookworm-slim

# Every dependency, dev ones included (typescript and the @types packages for the check).
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund

# Type-checks the sources the image ships. The runtime stage copies its marker file, so a type
# error fails the image build (BuildKit would otherwise skip a stage nothing depends on).
FROM deps AS check
COPY tsconfig.json ./
COPY src ./src
COPY jobs ./jobs
COPY main ./main
RUN npx tsc --noEmit -p . && touch /tmp/typecheck.ok

# Production dependencies only.
FROM ${NODE_IMAGE} AS prod-deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production \
    NPM_CONFIG_UPDATE_NOTIFIER=false \
    NPM_CONFIG_FUND=false
WORKDIR /app
COPY --from=prod-deps /app/node_modules ./node_modules
COPY package.json package-lock.json tsconfig.json ./
COPY src ./src
COPY jobs ./jobs
COPY main ./main
COPY templates ./templates
COPY --from=check /tmp/typecheck.ok /tmp/typecheck.ok
# The code is root-owned and read-only to the app; only var/ (MAIL_OUTBOX_DIR's default, used
# when SMTP_URL is unset) is writable.
RUN mkdir -p var/outbox && chown -R node:node var
USER node
# API (PORT) and the worker's health/metrics port (WORKER_PORT).
EXPOSE 3000 3001
CMD ["npm", "run", "api"]
