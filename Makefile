# Entry points of the repository (docs/CONTRACT.md, "The local stack and its commands").
# The work is done by the scripts under deploy/; each prints the name of every step.

SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)
# go.mod asks for go1.27.3; the go command fetches it from the module proxy once
# (README, "Quick start"), whatever Go 1.26+ the machine starts with.
export GOTOOLCHAIN := go1.27.3

# Fuzz targets `make test` runs, space-separated pkg:FuzzName
# (e.g. ./internal/ring:FuzzShardOf), each for FUZZTIME.
FUZZ_TARGETS ?= ./grab-service/internal/grabtransport:FuzzDecodeGrab ./grab-service/internal/grabtransport:FuzzGrabScannerAgrees ./internal/httpx:FuzzDecodeBytes \
	./promo-admin/internal/admintransport:FuzzDecodeCreate ./promo-admin/internal/admintransport:FuzzDecodePatch \
	./promo-admin/internal/admintransport:FuzzDecodeReject ./promo-admin/internal/admintransport:FuzzDecodeApprove \
	./internal/flow:FuzzDecode ./internal/flow:FuzzDecodeJSON ./lua:FuzzLedgerJSON ./internal/promo:FuzzIDValidators \
	./internal/jsonx:FuzzAppendString ./grab-service/internal/grab:FuzzResultJSON ./internal/flow:FuzzFlowJSON \
	./internal/flow:FuzzDecodeRequestIndex ./configcenter:FuzzParseSwitches ./internal/store:FuzzDecodeCursor
# A count of executions, not a duration: a duration can end while a worker on a busy machine
# is mid-input and fail with a bare "context deadline exceeded" (golang/go#75804,
# seen on go1.26); a count has no deadline to race. 20,000 inputs take 1 to 20 s a target here.
FUZZTIME ?= 20000x
# Extra arguments for the demo, bench and drill programs: make bench ARGS="..."
ARGS ?=
export FUZZ_TARGETS FUZZTIME ARGS

# Every module of go.work; in workspace mode one go command takes them all.
GO_PKGS := ./... ./promo-admin/... ./grab-service/... ./recovery/... ./client/...

.PHONY: build up down status test demo bench drill fmt vet vulncheck clean

build:
	@echo "==> build"
	@deploy/build.sh

up: build
	@echo "==> up"
	@STACK_BUILT=1 deploy/local/stack.sh up

down:
	@echo "==> down"
	@deploy/local/stack.sh down

status:
	@deploy/local/stack.sh status

test:
	@deploy/local/test.sh

demo:
	@deploy/local/demo.sh

bench:
	@deploy/local/run-tool.sh bench

drill:
	@deploy/local/run-tool.sh drill

# Prometheus and Alertmanager beside the running stack, with the repository's rules
# and routes (deploy/local/observe.sh; ALERT_WEBHOOK_URL is the receiver).
observe:
	@echo "==> observe"
	@deploy/local/observe.sh up

# deploy/validate is a module outside go.work (go.work says why): its own go command.
fmt:
	@echo "==> fmt"
	go fmt $(GO_PKGS)
	cd deploy/validate && GOWORK=off go fmt ./...

vet:
	@echo "==> vet"
	go vet $(GO_PKGS)
	cd deploy/validate && GOWORK=off go vet ./...

# govulncheck over every module, deploy/validate included, against the vulnerability
# database built offline from the pinned golang.org/x/vulndb (README, "Vulnerability checks").
vulncheck:
	@echo "==> vulncheck"
	@deploy/vulncheck.sh

clean: down
	@echo "==> clean"
	rm -rf bin .run
