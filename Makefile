# Thin wrappers over the npm scripts, so `make test` and `npm test` are the same thing.
# `make check` is the one command for a fresh machine (tools/check.sh); `make test` the inner loop.
.PHONY: check install start test lint typecheck bench bench-smoke build image tools k8s-test

install:
	npm ci

start:
	npm start

test:
	npm test

check:
	tools/check.sh

lint:
	npm run lint

typecheck:
	npm run typecheck

build:
	npm run build

# The main bench, then the same build on Node 24 beside the machine's older Node (bench/node-versions.ts),
# then the production entry's idle RSS (bench/idle-rss.ts, 5 starts).
bench:
	npm run bench
	npm run bench:node
	npm run bench:idle-rss

bench-smoke:
	npm run bench -- --smoke

image:
	docker build -t tollgate:dev .

# helm, etcd, kube-apiserver and promtool, pinned in tools/go.mod, built once per machine (tools/build.sh).
tools:
	tools/build.sh

# The chart, CRD, operator and alert tests against the real tools (a real API server on loopback),
# and the integration tests of the operator and the catalog source that use the same API server.
k8s-test: tools
	npx vitest run test/k8s test/integration/operator-catalog.test.ts test/integration/operator-leader.test.ts \
	  test/integration/kube-source.test.ts
