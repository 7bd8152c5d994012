# One image for every vmplane process; the command picks the process:
#   node dist/bundle/api.js | node dist/bundle/worker.js | node dist/bundle/agent.js | node dist/bin/migrate.js
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# As scripts/tools/bootstrap.mjs does: npm ci refuses this lockfile, which lacks other platforms'
# optional @swc/core builds; npm install takes the same locked versions and leaves the file alone.
RUN npm ci --no-audit --no-fund || npm install --no-save --no-audit --no-fund
COPY . .
# The product alone (tsconfig.build.json: no test, script, benchmark or dev stack), its workflows
# bundled, the agent, the API and the worker bundled (they start faster so), then only its runtime
# dependencies kept (test/deploy/image.test.ts holds both).
RUN npx tsc -p tsconfig.build.json && node scripts/build/bundle-workflows.mjs && node scripts/build/bundle-entry-points.mjs && npm prune --omit=dev

FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY --from=build /app/package.json /app/package-lock.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/db ./db
# Hosts run the real program; the release binary is static.
ARG CLOUD_HYPERVISOR_VERSION=v48.0
ADD --chmod=755 https://github.com/cloud-hypervisor/cloud-hypervisor/releases/download/${CLOUD_HYPERVISOR_VERSION}/cloud-hypervisor-static /usr/local/bin/cloud-hypervisor
CMD ["node", "dist/bundle/api.js"]
