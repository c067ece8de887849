# The project's tasks. `make demo` runs the whole system locally; `make test` is what CI runs.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

BIN          := $(CURDIR)/bin
GO           ?= go
# Cluster API's Cluster CRD is copied from this release of the cluster-api module.
CAPI_VERSION := v1.14.2
CAPI_DIR      = $(shell $(GO) mod download -json sigs.k8s.io/cluster-api@$(CAPI_VERSION) | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
CONTROLGEN   := $(BIN)/controller-gen
GINKGO       := $(BIN)/ginkgo
# golangci-lint is built from source at this version once per user, like the control plane (it is not part of
# the product's module graph).
GOLANGCI_LINT_VERSION := v2.15.0
TOOLS_CACHE   ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/gitfleet/tools
GOLANGCI_LINT := $(TOOLS_CACHE)/golangci-lint-$(GOLANGCI_LINT_VERSION)
# The sops CLI, built the same way: the tests encrypt with the real one
# (internal/sops, test/e2e/secrets) and find it through FLEET_SOPS.
SOPS_VERSION  := v3.13.3
SOPS          := $(TOOLS_CACHE)/sops-$(SOPS_VERSION)/sops
# Packages run concurrently by `go test`; each envtest suite starts its own API servers.
# Tests always run (-count=1): a result cached from another checkout proves nothing about this one.
TEST_P       ?= 2
TEST_TIMEOUT ?= 40m
GINKGO_ARGS  ?=

# Benchmarks: `make bench CLUSTERS=200 BUNDLES=5 EXPERIMENTS=ceiling,fanout`;
# `make bench EXPERIMENTS=agent BENCH_ARGS="-agent-idle 10m -agent-cut 5m"`;
# `make bench EXPERIMENTS=scaling BENCH_ARGS="-scaling-sizes 500,5000"` (docs/scale.md).
CLUSTERS     ?= 1000
BUNDLES      ?= 10
EXPERIMENTS  ?= all
BENCH_ARGS   ?=

.PHONY: help
help: ## Show the targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*?## "}{printf "  %-14s %s\n", $$1, $$2}'

$(CONTROLGEN): go.mod
	$(GO) build -o $@ sigs.k8s.io/controller-tools/cmd/controller-gen

$(GINKGO): go.mod
	$(GO) build -o $@ github.com/onsi/ginkgo/v2/ginkgo

.PHONY: generate
generate: $(CONTROLGEN) ## Generate deepcopy code and CRDs from api/, the manager's ClusterRole from +kubebuilder:rbac markers, copy Cluster API's CRD
	$(CONTROLGEN) object paths=./api/...
	$(CONTROLGEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLGEN) rbac:roleName=fleet-manager paths=./controllers/... output:rbac:artifacts:config=config/rbac
	install -m 0644 $(CAPI_DIR)/core/config/crd/bases/cluster.x-k8s.io_clusters.yaml internal/localcluster/capi/

.PHONY: controlplane
controlplane: ## Build kube-apiserver, etcd, kube-controller-manager, kube-scheduler and kwok from source once (cached per user), link them into bin/k8s
	@mkdir -p $(BIN)
	@dir=$$(bash test/controlplane/tools/build.sh) && ln -sfn "$$dir" $(BIN)/k8s && echo "control plane binaries: $$dir"

# The version `fleet --version` (and the images' labels) report.
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X github.com/gitfleet/fleet/internal/version.version=$(VERSION)

.PHONY: build
build: ## Build fleet, fleet-manager, fleet-agent and fleet-agent-deploy into bin/ (version stamped from git describe, or VERSION=; the agent's two binaries as they ship: static, stripped)
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/fleet ./cmd/fleet-manager
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w $(LDFLAGS)' -o $(BIN)/ ./cmd/fleet-agent ./cmd/fleet-agent-deploy

# Images: the names the install manifests and the chart use; the layouts are
# tagged latest and $(VERSION). Built for IMAGE_ARCH (default this machine's).
IMAGE_REGISTRY ?= ghcr.io/gitfleet
IMAGE_ARCH     ?= $(shell $(GO) env GOARCH)
# Fixed creation time (the last commit's), so the same tree gives the same digests.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
IMAGE_BIN       = $(BIN)/images/linux-$(IMAGE_ARCH)

.PHONY: images
images: ## Build the manager and agent images as OCI image layouts in bin/images (no Docker needed; the agent's holds fleet-agent-deploy beside fleet-agent)
	@mkdir -p $(IMAGE_BIN)
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) $(GO) build -trimpath -ldflags '-s -w $(LDFLAGS)' -o $(IMAGE_BIN)/ ./cmd/fleet-manager ./cmd/fleet-agent ./cmd/fleet-agent-deploy
	$(GO) build -o $(BIN)/ociimage-build ./internal/ociimage/build
	@for name in fleet-manager fleet-agent; do \
	  SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(BIN)/ociimage-build \
	    -binary $(IMAGE_BIN)/$$name -entrypoint /$$name -out $(BIN)/images/$$name -arch $(IMAGE_ARCH) \
	    $$(if [ $$name = fleet-agent ]; then echo -extra-binary $(IMAGE_BIN)/fleet-agent-deploy; fi) \
	    -ref $(IMAGE_REGISTRY)/$$name:latest -ref $(IMAGE_REGISTRY)/$$name:$(VERSION) \
	    -label org.opencontainers.image.title=$$name \
	    -label org.opencontainers.image.description="$$name of fleet, GitOps for fleets of Kubernetes clusters" \
	    -label org.opencontainers.image.source=https://github.com/gitfleet/fleet \
	    -label org.opencontainers.image.version=$(VERSION) \
	    -label org.opencontainers.image.revision=$$(git rev-parse HEAD 2>/dev/null || echo unknown) \
	    -label org.opencontainers.image.created=$$(date -u -d @$(SOURCE_DATE_EPOCH) +%Y-%m-%dT%H:%M:%SZ) \
	    | sed "s|^|$$name $(IMAGE_ARCH) |"; \
	done

.PHONY: vet
vet:
	$(GO) vet ./...

$(GOLANGCI_LINT):
	@mkdir -p $(TOOLS_CACHE)
	@tmp=$$(mktemp -d $(TOOLS_CACHE)/.build.XXXXXX) && \
	  GOBIN=$$tmp $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION) && \
	  mv $$tmp/golangci-lint $@ && rm -rf $$tmp

$(SOPS):
	@mkdir -p $(TOOLS_CACHE)
	@tmp=$$(mktemp -d $(TOOLS_CACHE)/.build.XXXXXX) && \
	  GOBIN=$$tmp $(GO) install github.com/getsops/sops/v3/cmd/sops@$(SOPS_VERSION) && \
	  mkdir -p $(dir $@) && mv $$tmp/sops $@ && rm -rf $$tmp

.PHONY: sops
sops: $(SOPS) ## Build the sops CLI the tests encrypt with (once per user, cached like golangci-lint)

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint with .golangci.yml (the linters Cluster API runs)
	$(GOLANGCI_LINT) run ./...

.PHONY: test-deps
test-deps: $(SOPS) ## Install what the tests need beyond Go (git's http-backend serves a real git server; headless chromium reads the dashboard; the sops CLI encrypts SOPS files)
	@test -x /usr/lib/git-core/git-http-backend || { \
	  echo "Installing git (tests serve repositories with git-http-backend)"; \
	  apt-get update -qq && apt-get install -y -qq git >/dev/null; }
	@test -x /usr/bin/chromium || { \
	  echo "Installing chromium (test/e2e/dashboard drives it headless)"; \
	  apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }

.PHONY: test
test: test-deps controlplane vet lint ## Run go vet, golangci-lint, unit tests and every envtest/Ginkgo suite against real API servers
	FLEET_CONTROLPLANE_ASSETS=$(BIN)/k8s FLEET_SOPS=$(SOPS) $(GO) test -count=1 -p $(TEST_P) -timeout $(TEST_TIMEOUT) ./... $(if $(GINKGO_ARGS),-args $(GINKGO_ARGS))
	$(MAKE) fuzz FUZZTIME=$(TEST_FUZZTIME)

# Each fuzz target runs for FUZZTIME on top of its seed corpus (which plain
# `go test` already runs).
FUZZTIME ?= 10s
# make test gives each fuzz target a number of inputs, not a time: with a
# time, Go's fuzzing coordinator before Go 1.27 can fail the target with a
# bare "context deadline exceeded" when the time runs out while a worker is
# busy (go.dev/issue/75804), which a loaded CI machine makes likely. A count
# has no deadline to race.
TEST_FUZZTIME ?= 1000x

# Stress: every e2e package STRESS_COUNT times, one run at a time, while
# STRESS_BURNERS busy loops compete for the CPU.
STRESS_COUNT   ?= 5
STRESS_BURNERS ?= 2
STRESS_PKGS    ?= $(shell $(GO) list ./test/e2e/...)

.PHONY: stress
stress: test-deps controlplane ## Run each e2e package STRESS_COUNT times under CPU contention (STRESS_PKGS, STRESS_BURNERS)
	FLEET_CONTROLPLANE_ASSETS=$(BIN)/k8s FLEET_SOPS=$(SOPS) bash test/stress.sh $(STRESS_COUNT) $(STRESS_BURNERS) $(STRESS_PKGS)

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME
	$(GO) test ./internal/bundlereader -run '^$$' -fuzz '^FuzzParseFleetYAML$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/bundlereader -run '^$$' -fuzz '^FuzzRead$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/target -run '^$$' -fuzz '^FuzzMatch$$' -fuzztime $(FUZZTIME)

.PHONY: demo
demo: controlplane build ## Bring up a manager and clusters (running workloads on simulated nodes) on this machine
	FLEET_CONTROLPLANE_ASSETS=$(BIN)/k8s $(BIN)/fleet dev up

.PHONY: demo-down
demo-down: ## Stop what `make demo` started
	$(BIN)/fleet dev down

.PHONY: bench
bench: controlplane ## Run the scale benchmarks (CLUSTERS, BUNDLES, EXPERIMENTS)
	FLEET_CONTROLPLANE_ASSETS=$(BIN)/k8s $(GO) run ./test/bench -clusters $(CLUSTERS) -bundles $(BUNDLES) -experiments $(EXPERIMENTS) $(BENCH_ARGS)

.PHONY: clean
clean:
	rm -rf $(BIN)
