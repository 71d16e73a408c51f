# image-fetch-worker: developer entry points. Each target is a thin wrapper over scripts/.
#
#   make run             build (release) and run the worker; starts a local RabbitMQ if none answers
#   make test            the whole test suite against a throw-away RabbitMQ (what CI runs)
#   make build           debug build
#   make release         release build (scripts/release-build.sh, as in the Dockerfile)
#   make bench           benchmarks (scripts/bench.sh)
#   make rabbitmq        start the local RabbitMQ node (127.0.0.1:5672, data in .run/rabbitmq)
#   make stop-rabbitmq   stop it
#   make compose-check   validate docker-compose.yml against the Compose specification
#   make kubernetes-check validate deploy/kubernetes/ (Kubernetes and KEDA schemas)
#   make monitoring-check validate and unit-test the alert rules (promtool), check the dashboard JSON
#   make clean           remove build output and local run data

SHELL := /bin/bash
ARGS ?=

.PHONY: all run test build release bench rabbitmq stop-rabbitmq compose-check kubernetes-check monitoring-check deps clean

all: build

deps:
	scripts/deps.sh

run:
	scripts/run.sh $(ARGS)

test:
	scripts/test.sh $(ARGS)

build: deps
	swift build

release: deps
	scripts/release-build.sh --product image-fetch-worker

bench:
	scripts/bench.sh $(ARGS)

rabbitmq:
	scripts/deps.sh --no-swift
	IFW_RABBIT_DIR="$(CURDIR)/.run/rabbitmq" scripts/rabbitmq.sh start

stop-rabbitmq:
	IFW_RABBIT_DIR="$(CURDIR)/.run/rabbitmq" scripts/rabbitmq.sh stop

compose-check:
	scripts/check-compose.sh

kubernetes-check:
	scripts/check-kubernetes.sh

monitoring-check:
	scripts/check-prometheus.sh

clean: stop-rabbitmq
	rm -rf .build .run data
