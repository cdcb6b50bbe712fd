# Thin wrappers over the npm scripts, so `make test` and `npm test` are the same thing.
.PHONY: install start test lint typecheck bench bench-smoke build image

install:
	npm ci

start:
	npm start

test:
	npm test

lint:
	npm run lint

typecheck:
	npm run typecheck

build:
	npm run build

bench:
	npm run bench

bench-smoke:
	npm run bench -- --smoke

image:
	docker build -t tollgate:dev .
