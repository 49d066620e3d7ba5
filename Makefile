# caliban-operator. Needs Go 1.26 and nothing else: the generators are
# pinned in go.mod, and the local test bed (kube-apiserver,
# kube-controller-manager, kube-scheduler, etcd, kwok) is built from
# hack/tools into bin/ on first use.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -o errexit -o nounset -o pipefail -c
.DEFAULT_GOAL := build

GO ?= go
# Each integration package starts a cluster of its own and spends most of
# its time waiting on it, so two packages run at a time (a serial run keeps
# two cores 40 % busy). The fault scenarios come first on the command line,
# which go test starts first: they are the longest package.
INTEGRATION_FLAGS ?= -p 2 -count=1 -timeout 40m
INTEGRATION_PKGS ?= ./test/faults/... ./test/integration/...
# make test fuzzes each target briefly on top of its seed corpus (which
# every unit run runs too); make fuzz is the long run.
FUZZ_SHORT ?= 5s
FUZZTIME ?= 5m
UNIT_PKGS = $(shell $(GO) list ./... | grep -v -e /test/integration/ -e /test/faults)

# Each phase of `make verify test` appends its time here (hack/phase.sh);
# one file per make invocation, under the git-ignored .cache/.
PHASE_LOG := $(CURDIR)/.cache/phases/$(shell date +%Y%m%dT%H%M%S)-$(shell echo $$PPID).log
PHASE = hack/phase.sh $(PHASE_LOG)

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
# Where a release goes: the image to $(IMAGE), the charts under
# $(REGISTRY)/charts. IMAGE is a repository; where one image is meant (make
# image) it may carry a tag, and without one gets $(VERSION).
REGISTRY ?= ghcr.io/caliban-ai
IMAGE ?= $(REGISTRY)/caliban-operator
IMAGE_REF = $(if $(findstring :,$(lastword $(subst /, ,$(IMAGE)))),$(IMAGE),$(IMAGE):$(VERSION))
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)

.PHONY: build
build: ## Build the operator into bin/caliban-operator and the kubectl plugin into bin/kubectl-caliban (and compile every package).
	$(GO) build ./...
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/caliban-operator ./cmd/caliban-operator
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/kubectl-caliban ./cmd/kubectl-caliban

.PHONY: generate
generate: ## Regenerate clients, deepcopy, OpenAPI and the CRDs (manifests/crds, charts/caliban-crds) from pkg/apis.
	hack/update-codegen.sh

.PHONY: verify
verify: ## Fail on generated-code drift (regenerated with an empty module cache), gofmt, go vet, an untidy go.mod, a doc citing a missing file, a missing license or license header, a map of the code (docs/architecture.md) that misses a package, or a workflow actionlint rejects or whose actions are not pinned to commits.
	$(PHASE) verify:codegen -- hack/verify-codegen.sh
	$(PHASE) verify:checks -- $(MAKE) --no-print-directory verify-checks

# The checks of verify other than the regeneration, timed as one phase.
.PHONY: verify-checks
verify-checks:
	hack/verify-doc-refs_test.sh >/dev/null
	hack/verify-headers_test.sh >/dev/null
	hack/verify-code-map_test.sh >/dev/null
	hack/fuzz_test.sh >/dev/null
	hack/phase_test.sh >/dev/null
	hack/e2e-kind_test.sh >/dev/null
	hack/verify-actions-pinned_test.sh >/dev/null
	hack/verify-doc-refs.sh
	hack/verify-headers.sh
	hack/verify-code-map.sh
	hack/verify-actions-pinned.sh
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './bin/*')); \
	  if [[ -n "$$unformatted" ]]; then echo "gofmt needed: $$unformatted" >&2; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags release ./hack/release
	@# text/template's reflection keeps every exported method in the binary (docs/performance.md#footprint).
	@linked=$$($(GO) list -deps ./cmd/caliban-operator | grep -xE 'text/template|html/template|google.golang.org/grpc' || true); \
	  if [[ -n "$$linked" ]]; then echo "the operator links $$linked, which doubles its binary and idle memory (docs/performance.md#footprint)" >&2; exit 1; fi
	$(GO) mod tidy -diff
	cd hack/tools && $(GO) mod tidy -diff
	cd hack/tools/agent-sandbox && $(GO) mod tidy -diff
	cd hack/tools/prometheus && $(GO) mod tidy -diff
	cd hack/tools/actionlint && $(GO) mod tidy -diff
	cd hack/tools/actionlint && $(GO) run github.com/rhysd/actionlint/cmd/actionlint -shellcheck= -pyflakes= $(CURDIR)/.github/workflows/*.yml

.PHONY: tools
tools: ## Build the local test bed's binaries and promtool into bin/ (about 16 minutes cold, seconds after).
	$(PHASE) tools -- hack/build-tools.sh

# Phony, so that the script decides: it rebuilds only when
# hack/tools/prometheus changed, and otherwise costs nothing.
.PHONY: bin/promtool
bin/promtool: ## Build Prometheus' promtool into bin/, for the alerting rules' unit tests (test/monitoring).
	$(PHASE) tools:promtool -- hack/build-tools.sh promtool

.PHONY: test-unit
test-unit: bin/promtool ## Unit tests: builders, sync handlers, generated-artefact checks, the alerting rules (promtool).
	$(PHASE) unit -- $(GO) test -count=1 $(UNIT_PKGS)

.PHONY: test-integration
test-integration: tools ## Integration tests against a real control plane (kwokctl), and the fault scenarios at their short sizes.
	$(PHASE) integration --per-package -- $(GO) test $(INTEGRATION_FLAGS) $(INTEGRATION_PKGS)

.PHONY: test-faults
test-faults: tools ## The fault scenarios at full size (docs/reliability.md); each on a fresh cluster.
	CALIBAN_FAULTS_FULL=1 $(GO) test $(INTEGRATION_FLAGS) -v ./test/faults/...

.PHONY: test-fuzz
test-fuzz: ## Every fuzz target for FUZZ_SHORT (5s) each, on top of its seed corpus.
	$(PHASE) fuzz -- env FUZZTIME=$(FUZZ_SHORT) hack/fuzz.sh

.PHONY: fuzz
fuzz: ## Every fuzz target for FUZZTIME (5m) each.
	FUZZTIME=$(FUZZTIME) hack/fuzz.sh

.PHONY: test
test: test-unit test-fuzz test-integration ## Unit tests, bounded fuzzing, integration tests and the short fault scenarios; then how long each phase took.
	@$(PHASE) --summary

.PHONY: bench
bench: tools ## Benchmark the operator on a fresh test cluster; writes test/bench/results/ (BENCH_N=1000; BENCH_AGENT_SANDBOX=real: through agent-sandbox's controller; =warm: warm pools against agent-sandbox's own claims, and the cold path).
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/caliban-operator ./cmd/caliban-operator
	$(GO) run ./test/bench

# LOCAL mode (KUBECONFIG unset or empty, or LOCAL=1/true/yes/on) needs the
# test bed in bin/; the test mirrors hack/run-local's localMode.
# CALIBAN_OPERATOR_BINARY runs another operator binary instead of building one.
# hack/run-local is built rather than `go run`, which turns a Ctrl-C and any
# non-zero exit into status 1; this way make reports the operator's code.
.PHONY: run
run: ## Run the operator locally: on a throwaway kwokctl cluster, or against $KUBECONFIG (see README).
	@if [[ -z "$${CALIBAN_OPERATOR_BINARY:-}" ]]; then \
	  echo "$(GO) build -o bin/caliban-operator ./cmd/caliban-operator"; \
	  $(GO) build -o bin/caliban-operator ./cmd/caliban-operator; \
	fi
	@local=$$(tr '[:upper:]' '[:lower:]' <<<"$${LOCAL:-}" | tr -d '[:space:]'); \
	  if [[ -z "$${KUBECONFIG:-}" || "$$local" =~ ^(1|true|yes|on)$$ ]]; then \
	    echo "hack/build-tools.sh"; hack/build-tools.sh; \
	  fi
	$(GO) build -o bin/run-local ./hack/run-local
	bin/run-local

.PHONY: chart
chart: ## Package the Helm charts (charts/) into dist/, version and appVersion stamped from VERSION.
	$(GO) run ./hack/chart -version "$(VERSION)" -out dist charts/caliban-crds charts/caliban-operator

.PHONY: image
image: ## Build the container image $(IMAGE):$(VERSION) with a Docker engine (make release needs none).
	@command -v docker >/dev/null && docker info >/dev/null 2>&1 || { echo "make image needs a running Docker engine (docker info failed); make release builds the image without one" >&2; exit 1; }
	docker build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) -t $(IMAGE_REF) .

# The agent pods' images a release runs come from hack/release/agent-images.txt,
# each pinned by tag and digest; RELEASE_CALIBAND_IMAGE and RELEASE_GIT_IMAGE
# replace them for one build (ADR 0031).
.PHONY: release
release: ## Build release VERSION (vX.Y.Z) into dist/ with Go alone: the multi-arch image (OCI layout), caliban-operator.yaml, the charts, kubectl-caliban archives, krew manifest, notes, SHA256SUMS; then check them against each other. Refuses agent images not pinned by digest (hack/release/agent-images.txt).
	$(GO) run ./hack/release -version "$(VERSION)" -image "$(IMAGE)" -registry "$(REGISTRY)" -out dist \
	  $(if $(RELEASE_CALIBAND_IMAGE),-caliband-image "$(RELEASE_CALIBAND_IMAGE)") $(if $(RELEASE_GIT_IMAGE),-git-image "$(RELEASE_GIT_IMAGE)")
	$(GO) test -count=1 -tags release -run TestTheReleaseAgreesWithItself ./hack/release -args -dist "$(CURDIR)/dist"

.PHONY: release-push
release-push: ## Push dist/'s image to $(IMAGE):$(VERSION) and its charts to $(REGISTRY)/charts (credentials of ~/.docker/config.json; PLAIN_HTTP=1 for a local registry).
	$(GO) run ./hack/release push -out dist $(if $(PLAIN_HTTP),-plain-http)

# Where make deploy remembers the IMAGE it was last given (git-ignored).
DEPLOY_STATE ?= .cache/deploy/image

# deploy and undeploy act on a real cluster: say at once when there is none.
NEED_CLUSTER = command -v kubectl >/dev/null || { echo "make $@ needs kubectl on PATH" >&2; exit 1; }; \
  kubectl get --raw /readyz --request-timeout=10s >/dev/null 2>&1 || { echo "make $@ needs a reachable cluster: kubectl get --raw /readyz failed for the current KUBECONFIG context" >&2; exit 1; }

.PHONY: deploy
deploy: ## Install the CRDs, then the operator, into the cluster of the current KUBECONFIG; IMAGE=repo:tag (or @digest) runs that image, and later deploys keep it.
	@$(NEED_CLUSTER)
	kubectl apply --server-side -k manifests/crds
	kubectl wait --for condition=Established --timeout 60s crd/workspaces.caliban.caliban-ai.dev crd/calibantasks.caliban.caliban-ai.dev
	$(GO) run ./hack/deploy -state "$(DEPLOY_STATE)" $(if $(filter command line environment,$(origin IMAGE)),-image "$(IMAGE)") | kubectl apply --server-side -f -

.PHONY: deploy-reset
deploy-reset: ## Forget the IMAGE make deploy remembers, then deploy the tree's release.
	@$(NEED_CLUSTER)
	$(GO) run ./hack/deploy -state "$(DEPLOY_STATE)" -reset | kubectl apply --server-side -f -

.PHONY: undeploy
undeploy: ## Delete every CalibanTask (draining for at most UNDEPLOY_DRAIN_WAIT=60 s), then the operator, then the CRDs.
	@$(NEED_CLUSTER)
	hack/undeploy.sh

.PHONY: e2e-kind
e2e-kind: ## Run docs/quickstart.md on kind with the real agent-sandbox controller (needs Docker and network).
	hack/e2e-kind.sh

.PHONY: clean
clean: ## Remove bin/ and dist/ (the test bed rebuilds from the Go build cache in seconds).
	rm -rf bin dist

.PHONY: help
help: ## List the targets.
	@grep -E '^[a-z/-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "%-18s %s\n", $$1, $$2}'
