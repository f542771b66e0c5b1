# cleanup-operator

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

# Tools and test binaries are built from Go modules into bin/ once.
LOCALBIN ?= $(shell pwd)/bin
export PATH := $(LOCALBIN):$(PATH)

CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen
CONTROLLER_TOOLS_VERSION ?= v0.23.0
KUSTOMIZE ?= $(LOCALBIN)/kustomize
KUSTOMIZE_VERSION ?= v5.7.1

# The Kubernetes version the tests and the local control plane run.
KUBE_APISERVER ?= $(LOCALBIN)/kube-apiserver
KUBE_CONTROLLER_MANAGER ?= $(LOCALBIN)/kube-controller-manager
KUBECTL ?= $(LOCALBIN)/kubectl
ETCD ?= $(LOCALBIN)/etcd
CRDS ?= $(LOCALBIN)/crds

# The test binaries envtest runs, and the CRDs it installs besides ours.
export KUBEBUILDER_ASSETS := $(LOCALBIN)
export CLEANUP_CRDS_DIR := $(CRDS)

GO_TEST_FLAGS ?= -count=1

# The operator's version and image, and its OLM bundle (make bundle, docs/install/olm.md).
VERSION ?= 0.1.0
IMG ?= ghcr.io/fleetops-dev/cleanup-operator:v$(VERSION)
BUNDLE_IMG ?= ghcr.io/fleetops-dev/cleanup-operator-bundle:v$(VERSION)
CHANNELS ?= alpha
DEFAULT_CHANNEL ?= alpha
CONTAINER_TOOL ?= docker
# What hack/tools/bundle renders the bundle with; the bundle check reads the same.
BUNDLE_ENV = BUNDLE_VERSION=$(VERSION) BUNDLE_IMG=$(IMG) BUNDLE_CHANNELS=$(CHANNELS) BUNDLE_DEFAULT_CHANNEL=$(DEFAULT_CHANNEL)

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_0-9.-]+:.*?##/ { printf "  %-22s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: controller-gen ## Generate the CRD, RBAC and webhook manifests.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd webhook paths="./api/...;./internal/...;./cmd/..." output:crd:artifacts:config=config/crd/bases
	@$(MAKE) --no-print-directory chart

# The Helm chart: what it embeds from config/ (the CRD, the manager's
# generated role and webhooks, the alerts, the dashboard) is copied here, and
# its appVersion is VERSION; test/install fails when they differ.
CHART ?= charts/cleanup-operator

.PHONY: chart
chart: ## Copy into the Helm chart what it embeds from config/, and set its appVersion to VERSION.
	cp config/crd/bases/cleanup.fleetops.dev_cleanuppolicies.yaml $(CHART)/crds/
	cp config/rbac/role.yaml $(CHART)/files/manager-role.yaml
	cp config/rbac/bootstrap_role.yaml $(CHART)/files/bootstrap-role.yaml
	cp config/webhook/manifests.yaml $(CHART)/files/webhook-manifests.yaml
	cp config/prometheus/rule.yaml $(CHART)/files/prometheus-rule.yaml
	cp config/grafana/cleanup-operator.json $(CHART)/files/cleanup-operator.json
	sed -e 's/^appVersion: .*/appVersion: "$(VERSION)"/' $(CHART)/Chart.yaml > $(CHART)/Chart.yaml.tmp && mv $(CHART)/Chart.yaml.tmp $(CHART)/Chart.yaml

.PHONY: helm-lint
helm-lint: ## Lint the Helm chart with Helm's library, for the default values and each tested value set.
	cd test/install && go test $(GO_TEST_FLAGS) -run 'TestChartLints' ./...

.PHONY: generate
generate: controller-gen ## Generate the DeepCopy methods.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: fmt
fmt: ## Run go fmt.
	go fmt ./...

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: verify
verify: manifests generate ## Fail if generated files are not committed as generated.
	@git diff --exit-code -- config/ api/ charts/ || (echo "generated files differ: run 'make manifests generate' and commit" && exit 1)

# GITOPS_STATES_DIR keeps the policies test/gitops assessed, as the operator
# wrote them, for test/gitops/argocd to read through Argo CD's own code.
GITOPS_STATES_DIR ?= $(LOCALBIN)/gitops-states

.PHONY: test
# internal/controller, by far the longest suite, starts at once beside the
# others: the suites wait on their API servers more than they compute, so
# three at a time fit two cores (docs/developer/testing.md).
test: manifests generate fmt vet envtest-bins crds ## Run every unit and envtest suite on a real API server.
	rm -rf $(GITOPS_STATES_DIR)
	go test $(GO_TEST_FLAGS) ./internal/controller & controller=$$!; \
	GITOPS_STATES_DIR=$(GITOPS_STATES_DIR) go test $(GO_TEST_FLAGS) $$(go list ./... | grep -v '/internal/controller$$'); others=$$?; \
	wait $$controller && exit $$others
	go build -o $(LOCALBIN)/manager ./cmd
	cd test/install && go test $(GO_TEST_FLAGS) -timeout 20m ./...
	cd test/gitops/argocd && GITOPS_STATES_DIR=$(GITOPS_STATES_DIR) go test $(GO_TEST_FLAGS) ./...
	cd hack/tools/bundle && $(BUNDLE_ENV) go test $(GO_TEST_FLAGS) ./...
	cd test/monitoring && go test $(GO_TEST_FLAGS) -timeout 30m ./...

# The packages whose tests need no API server (internal/controller holds the
# envtest suite of the reconcilers together).
UNIT_PACKAGES = ./api/... ./cmd ./hack/fleetrss ./hack/krew ./hack/shardsim ./internal/cel/... ./internal/decision/... \
	./internal/fuzzrand ./internal/governance ./internal/metrics ./internal/operator/heartbeat ./internal/policy \
	./internal/record/... ./internal/review/... ./internal/scheme ./internal/stamp ./internal/tally ./internal/teardown \
	./internal/testenv ./internal/watch ./internal/webhook/... ./test/codesize ./test/docs ./test/repo

.PHONY: test-unit
test-unit: crds ## Run the tests that need no API server: the pure packages and the reconcilers' unit tests (about 30 s warm).
	go test $(GO_TEST_FLAGS) $(UNIT_PACKAGES)

.PHONY: test-monitoring
test-monitoring: ## Check the alerts and the dashboard: the rules' unit tests in promtool (built from hack/tools/promtool), and every query against the metrics the operator exports.
	cd test/monitoring && go test $(GO_TEST_FLAGS) -timeout 30m -v ./...

# How many random seeds test-plan runs; PLAN_SEED=<seed> replays one.
PLAN_SEEDS ?= 20

.PHONY: test-plan
test-plan: envtest-bins crds ## Run the plan's and diff's property tests (test/plan) for PLAN_SEEDS random seeds (default 20; make test runs 2).
	PLAN_SEEDS=$(PLAN_SEEDS) go test $(GO_TEST_FLAGS) -timeout 60m -v -run 'TestPlanMatchesTeardown|TestDiffMatchesTeardown' ./test/plan/

.PHONY: bench
bench: envtest-bins crds ## Run the benchmarks: test/bench, then the manager as shipped beside a bare loop and OCM's gc (test/perf).
	go test -run '^$$' -bench . -benchmem ./...
	cd test/perf && go run .

# BENCH_* variables choose what test/perf runs (docs/developer/results.md), e.g.
# BENCH_SCENARIOS=idle BENCH_CLUSTERS=3000 BENCH_WORKS_PER_CLUSTER=10.
.PHONY: bench-shipped
bench-shipped: envtest-bins crds ## Run only test/perf: teardown and idle-fleet memory of the manager binary as shipped.
	cd test/perf && go run .

.PHONY: bench-smoke
bench-smoke: envtest-bins crds ## Check that test/perf measures what it says, on a tiny fleet (a minute or two).
	cd test/perf && go test $(GO_TEST_FLAGS) .

# How much each fuzz target runs (Go runs one per invocation): a number of
# executions, about 30 s each on two cores. A count, not a duration: with a
# duration, Go 1.26's fuzzing coordinator can report its own deadline as a
# failure ("context deadline exceeded" with no failing input, go.dev/issue/75804);
# a count sets no deadline. FUZZTIME=60s still runs both for a duration.
FUZZ_COMPILE_EXECS ?= 8000x
FUZZ_PLAN_EXECS ?= 20000x

.PHONY: fuzz
fuzz: crds ## Run each fuzz target for a number of executions (or FUZZTIME): policy compile, then the teardown decision.
	go test -run '^$$' -fuzz '^FuzzCompile$$' -fuzztime $(or $(FUZZTIME),$(FUZZ_COMPILE_EXECS)) ./internal/cel
	go test -run '^$$' -fuzz '^FuzzTeardownPlan$$' -fuzztime $(or $(FUZZTIME),$(FUZZ_PLAN_EXECS)) ./internal/decision

##@ Build

.PHONY: build
build: manifests generate fmt vet ## Build the manager.
	go build -o $(LOCALBIN)/manager ./cmd

# The plugin's version (kubectl cleanup version), and the platforms its
# release archives and krew manifest (plugins/krew/cleanup.yaml) cover.
PLUGIN_LDFLAGS ?= -X main.version=v$(VERSION)
PLUGIN_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64

.PHONY: plugin
plugin: ## Build the kubectl plugin into bin/kubectl-cleanup, with its completion shim bin/kubectl_complete-cleanup.
	go build -ldflags "$(PLUGIN_LDFLAGS)" -o $(LOCALBIN)/kubectl-cleanup ./cmd/kubectl-cleanup
	cp cmd/kubectl-cleanup/kubectl_complete-cleanup $(LOCALBIN)/

.PHONY: plugin-dist
plugin-dist: ## Build the plugin's release archives into dist/ and their krew manifest, dist/krew/cleanup.yaml, with the archives' sha256.
	@for p in $(PLUGIN_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; dir=dist/kubectl-cleanup_$${os}_$${arch}; mkdir -p $$dir; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch go build -ldflags "$(PLUGIN_LDFLAGS)" -o $$dir/kubectl-cleanup ./cmd/kubectl-cleanup; \
		cp cmd/kubectl-cleanup/kubectl_complete-cleanup LICENSE $$dir/; \
		tar -czf dist/kubectl-cleanup_v$(VERSION)_$${os}_$${arch}.tar.gz -C $$dir kubectl-cleanup kubectl_complete-cleanup LICENSE; \
	done
	go run ./hack/krew -manifest plugins/krew/cleanup.yaml -dist dist -out dist/krew/cleanup.yaml

.PHONY: docs-cli
docs-cli: ## Regenerate docs/reference/cli from the plugin's help.
	go test ./cmd/kubectl-cleanup -run TestCLIReference -update

.PHONY: run
run: manifests generate fmt vet ## Run the manager against the cluster in KUBECONFIG.
	ENABLE_WEBHOOKS=false go run ./cmd

##@ Test binaries, built from Go modules (no download of prebuilt binaries)

.PHONY: envtest-bins
envtest-bins: $(KUBE_APISERVER) $(ETCD) $(KUBECTL) $(KUBE_CONTROLLER_MANAGER) ## Build kube-apiserver, etcd, kubectl and kube-controller-manager into bin/.

# Each build says what it builds, how many of its packages it has compiled and
# the time it took: the first build of kube-apiserver compiles about two
# thousand packages. The Kubernetes binaries carry the version of
# k8s.io/kubernetes in hack/tools/kube/go.mod (hack/tools/kube/build.sh).
$(KUBE_APISERVER): hack/tools/kube/go.mod hack/tools/kube/build.sh
	hack/tools/kube/build.sh kube-apiserver "1 of 4" $@

$(ETCD): hack/tools/etcd/go.mod
	cd hack/tools/etcd && ../../gobuild.sh "etcd (2 of 4) from $$(go list -m -f '{{.Path}} {{.Version}}' go.etcd.io/etcd/server/v3)" $@ .

$(KUBECTL): hack/tools/kube/go.mod hack/tools/kube/build.sh
	hack/tools/kube/build.sh kubectl "3 of 4" $@

$(KUBE_CONTROLLER_MANAGER): hack/tools/kube/go.mod hack/tools/kube/build.sh
	hack/tools/kube/build.sh kube-controller-manager "4 of 4" $@

.PHONY: crds
crds: ## Copy the OCM and policy CRDs from their Go modules into bin/crds.
	hack/crds.sh $(CRDS)

.PHONY: kustomize
kustomize: $(KUSTOMIZE)
$(KUSTOMIZE):
	GOBIN=$(LOCALBIN) go install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION)

.PHONY: controller-gen
controller-gen: $(CONTROLLER_GEN)
$(CONTROLLER_GEN):
	GOBIN=$(LOCALBIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)

##@ Deployment

.PHONY: docker-build
docker-build: ## Build the manager image IMG with CONTAINER_TOOL.
	$(CONTAINER_TOOL) build -t $(IMG) .

# render writes config/default with the manager image IMG, from a copy of
# config/ so that the committed kustomizations stay as they are.
render = tmp=$$(mktemp -d) && cp -r config "$$tmp/" && (cd "$$tmp/config/manager" && $(KUSTOMIZE) edit set image controller=$(IMG)) && $(KUSTOMIZE) build "$$tmp/config/default"; status=$$?; rm -rf "$$tmp"; exit $$status

.PHONY: build-installer
build-installer: manifests kustomize ## Render config/default with IMG into dist/install.yaml.
	mkdir -p dist
	($(render)) > dist/install.yaml

.PHONY: deploy
deploy: manifests kustomize $(KUBECTL) ## Install the operator (config/default, with IMG) into the cluster in KUBECONFIG.
	($(render)) | $(KUBECTL) apply --server-side -f -

.PHONY: undeploy
undeploy: kustomize $(KUBECTL) ## Remove what deploy installed.
	$(KUSTOMIZE) build config/default | $(KUBECTL) delete --ignore-not-found -f -

##@ Bundle

.PHONY: bundle
bundle: manifests ## Regenerate the OLM bundle (bundle/, bundle.Dockerfile) from config/manifests.
	cd hack/tools/bundle && $(BUNDLE_ENV) go run . --root $(CURDIR)

.PHONY: bundle-check
bundle-check: ## Fail if bundle/ is stale or invalid (make test runs this check too).
	cd hack/tools/bundle && $(BUNDLE_ENV) go test $(GO_TEST_FLAGS) ./...

.PHONY: bundle-build
bundle-build: ## Build the bundle image with CONTAINER_TOOL.
	$(CONTAINER_TOOL) build -f bundle.Dockerfile -t $(BUNDLE_IMG) .

##@ End to end

E2E_TEST_FLAGS ?= -timeout 20m -v . -ginkgo.v

# The suite runs the policy propagator as a process of its own, bin/e2e-propagator,
# built from test/e2e/cmd/propagator with the module file of the propagator's version
# (its argument: the go flags that pick it).
e2e_propagator = cd test/e2e && GOFLAGS="$(GOFLAGS) $(1)" go build -o $(LOCALBIN)/e2e-propagator ./cmd/propagator

.PHONY: test-e2e
test-e2e: build plugin envtest-bins crds $(KUBE_CONTROLLER_MANAGER) ## Run the operator with OCM's registration hub, work agent and policy propagator (test/e2e, its own Go module): OCM v1.2.0, policy framework v0.18.0.
	$(call e2e_propagator)
	cd test/e2e && go test $(GO_TEST_FLAGS) $(E2E_TEST_FLAGS)

# The older versions the e2e suite also runs against: its go.mod pins the
# newest, this module file OCM v1.0.0 and the policy framework v0.16.0
# (docs/install/compatibility.md).
E2E_OLD_MODFILE ?= ocm-v1.0.0.mod

.PHONY: test-e2e-ocm-1.0
test-e2e-ocm-1.0: build plugin envtest-bins crds $(KUBE_CONTROLLER_MANAGER) ## Run test/e2e against OCM v1.0.0 and the policy framework v0.16.0 (test/e2e/ocm-v1.0.0.mod).
	$(call e2e_propagator,-modfile=$(E2E_OLD_MODFILE) -tags=ocm_v1_0)
	cd test/e2e && GOFLAGS="$(GOFLAGS) -modfile=$(E2E_OLD_MODFILE) -tags=ocm_v1_0" go test $(GO_TEST_FLAGS) $(E2E_TEST_FLAGS)

##@ Local control plane

# RUN_LOCAL_FLAGS are run-local's flags, e.g. -log-format=json.
RUN_LOCAL_FLAGS ?=

.PHONY: run-local
run-local: manifests generate envtest-bins crds plugin ## Run the operator on a local control plane with example policies and a sample fleet.
	go build -o $(LOCALBIN)/run-local ./hack/run-local
	$(LOCALBIN)/run-local $(RUN_LOCAL_FLAGS)
