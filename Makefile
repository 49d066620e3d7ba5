# caliban-operator. Needs Go 1.26 and nothing else: the generators are
# pinned in go.mod, and the local test bed (kube-apiserver,
# kube-controller-manager, kube-scheduler, etcd, kwok) is built from
# hack/tools into bin/ on first use.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -o errexit -o nounset -o pipefail -c
.DEFAULT_GOAL := build

GO ?= go
# Integration tests share one cluster per package; run packages one at a
# time so two control planes never compete for the machine's two cores.
INTEGRATION_FLAGS ?= -p 1 -count=1 -timeout 40m
UNIT_PKGS = $(shell $(GO) list ./... | grep -v /test/integration/)

.PHONY: build
build: ## Compile every package (the operator binary arrives with the controllers).
	$(GO) build ./...

.PHONY: generate
generate: ## Regenerate clients, deepcopy, OpenAPI and the CRDs from pkg/apis.
	hack/update-codegen.sh

.PHONY: verify
verify: ## Fail on generated-code drift, gofmt or go vet findings, or an untidy go.mod.
	hack/verify-codegen.sh
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './bin/*')); \
	  if [[ -n "$$unformatted" ]]; then echo "gofmt needed: $$unformatted" >&2; exit 1; fi
	$(GO) vet ./...
	$(GO) mod tidy -diff
	cd hack/tools && $(GO) mod tidy -diff

.PHONY: tools
tools: ## Build the local test bed's binaries into bin/ (about 16 minutes cold, seconds after).
	hack/build-tools.sh

.PHONY: test-unit
test-unit: ## Unit tests: builders, sync handlers, generated-artefact checks.
	$(GO) test -count=1 $(UNIT_PKGS)

.PHONY: test-integration
test-integration: tools ## Integration tests against a real control plane (kwokctl).
	$(GO) test $(INTEGRATION_FLAGS) ./test/integration/...

.PHONY: test
test: test-unit test-integration ## Unit and integration tests.

.PHONY: run
run: ## Run the operator locally (not wired up yet; see README).
	@echo "make run is not wired up yet: the operator binary arrives with the controllers (issue 4)." >&2
	@exit 1

.PHONY: clean
clean: ## Remove bin/ (the test bed rebuilds from the Go build cache in seconds).
	rm -rf bin

.PHONY: help
help: ## List the targets.
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "%-18s %s\n", $$1, $$2}'
