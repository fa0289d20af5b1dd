# The operator's image: Node.js 24 runs the TypeScript sources directly (type stripping); the
# workflow code is bundled at build time so a worker starts at once.
FROM node:24-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
COPY crd crd
COPY activities activities
COPY workflows workflows
COPY watcher watcher
COPY deploy/crd.yaml deploy/crd.yaml
COPY main.ts worker.ts ./
RUN node --input-type=module -e "import('./worker.ts').then(async (w) => (await import('node:fs')).writeFileSync('workflow-bundle.js', await w.bundleWorkflows()))"

FROM node:24-slim
WORKDIR /app
COPY --from=build /app /app
ENV QUEEN_WORKFLOW_BUNDLE=/app/workflow-bundle.js NODE_ENV=production
USER 65532:65532
ENTRYPOINT ["node", "main.ts"]
