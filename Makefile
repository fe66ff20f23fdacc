# otelcol-nvml: the nvml receiver and its collector distribution.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

# go-nvml is cgo; its header's deprecation notes are noise.
export CGO_ENABLED := 1
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

GO        ?= go
# Pinned tool versions. mdatagen is built from tools/mdatagen/go.mod, which
# must name the same version (checked below).
OCB_VERSION      := v0.165.0
MDATAGEN_VERSION := v0.161.0
HELM_VERSION     := v3.22.0
NFPM_VERSION     := v2.45.2

BIN       := $(CURDIR)/.bin
OCB       := $(BIN)/builder-$(OCB_VERSION)
MDATAGEN  := $(BIN)/mdatagen-$(MDATAGEN_VERSION)
# helm links the Kubernetes version it assumes without --kube-version (and
# lints against) at build time; a plain go install leaves helm's fallback,
# v1.20, below the chart's kubeVersion. 1.37: the client-go helm v3.22 is
# built with, as helm's own Makefile sets it.
HELM_KUBE_MAJOR  := 1
HELM_KUBE_MINOR  := 37
HELM      := $(BIN)/helm-$(HELM_VERSION)-k8s$(HELM_KUBE_MAJOR).$(HELM_KUBE_MINOR)
NFPM      := $(BIN)/nfpm-$(NFPM_VERSION)
HELM_LDFLAGS := -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) \
	$(foreach p,pkg/chartutil pkg/lint/rules,-X helm.sh/helm/v3/$(p).k8sVersionMajor=$(HELM_KUBE_MAJOR) -X helm.sh/helm/v3/$(p).k8sVersionMinor=$(HELM_KUBE_MINOR))
DIST_DIR  := $(CURDIR)/_build
OTELCOL   := $(DIST_DIR)/otelcol-nvml
CONFIG    ?= deploy/config.yaml
RECEIVER  := receiver/nvmlreceiver

.PHONY: all help check test vet generate check-generated unit build run smoke bench fmt tools clean h200-bundle h200-alert-bundle fakenvml kubeapi e2e demo rules rules-bench rules-bench3 deploy-check deploy-generate image image-test dashboard soak logvolume build-arm64 lint-workflows check-version report packages package-test release-artifacts release-check release-push release-login test-checks test-background demo-check alertmanager rules-render

## all: the default target: build
all: build

## help: every target with its ## line (this list)
help:
	@awk '/^## [a-z0-9-]+:/ { t = $$2; sub(/:$$/, "", t); sub(/^## [^:]+: /, ""); printf "%-18s %s\n", t, $$0; next } \
		/^## / { sub(/^## /, ""); printf "%-18s %s\n", "", $$0 }' $(firstword $(MAKEFILE_LIST))

## check: the edit-test loop, a few minutes warm: vet, the unit tests with -race (test/docs' links and README
## checks among them), the rules' promtool tests; make test is the whole CI
check: vet unit rules

## test: everything CI runs (vet, the workflows' lint, generated-code drift, the ocb build, unit tests with -race,
## alert-rule tests, a smoke run, the chart and deploy checks, the e2e suite, both images (arm64 under qemu-user),
## the release artifacts, the .deb and .rpm (the .deb installed into a Debian root and run))
test: vet lint-workflows check-generated build
	@# The arm64 cross-build (about 7 CPU-minutes with a cold cache) and the
	@# SBOM tool's build run at the lowest priority beside the checks, on the
	@# CPU their waits leave idle.
	$(MAKE) --no-print-directory -j2 test-checks test-background NICE='nice -n 19'
	$(MAKE) --no-print-directory image-test release-check

## test-checks: the checks of make test that need only the amd64 build, one after another
test-checks:
	$(MAKE) --no-print-directory -j1 unit rules smoke deploy-check e2e

## test-background: what make test builds beside them (with NICE): the arm64 cross-build, its simulated NVML, the SBOM tool
test-background:
	$(MAKE) --no-print-directory -j1 build-arm64 $(FAKENVML_ARM64) $(CYCLONEDX)

## vet: gofmt, go vet (with every build tag, and test/deploy), the build without cgo, go vet for darwin
vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	$(GO) vet -tags "e2e smoke h200probe image" ./...
	cd test/deploy && $(GO) vet ./...
	@# Without cgo (a laptop, a CGO_ENABLED=0 distribution) everything builds,
	@# and on macOS it vets; NVML is then reported unavailable.
	CGO_ENABLED=0 $(GO) build ./...
	GOOS=darwin CGO_ENABLED=0 $(GO) vet ./...

$(OCB):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install go.opentelemetry.io/collector/cmd/builder@$(OCB_VERSION)
	mv $(BIN)/builder $@

$(MDATAGEN): tools/mdatagen/go.mod tools/mdatagen/go.sum
	@grep -q "go.opentelemetry.io/collector/cmd/mdatagen $(MDATAGEN_VERSION)" tools/mdatagen/go.mod || \
		{ echo "tools/mdatagen/go.mod does not pin mdatagen $(MDATAGEN_VERSION)"; exit 1; }
	@mkdir -p $(BIN)
	cd tools/mdatagen && $(GO) build -o $@ go.opentelemetry.io/collector/cmd/mdatagen

$(HELM):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) CGO_ENABLED=0 $(GO) install -trimpath -ldflags '$(HELM_LDFLAGS)' helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	mv $(BIN)/helm $@

$(NFPM):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) CGO_ENABLED=0 $(GO) install github.com/goreleaser/nfpm/v2/cmd/nfpm@$(NFPM_VERSION)
	mv $(BIN)/nfpm $@

## tools: build the pinned ocb, mdatagen, helm and nfpm into .bin/
tools: $(OCB) $(MDATAGEN) $(HELM) $(NFPM)

## generate: regenerate code and documentation.md from metadata.yaml, and the simulators' generic getters from nvml.h
## and docs/reference/metrics.md's metric table from metadata.yaml (tools/metricstable)
generate: $(MDATAGEN)
	$(MDATAGEN) $(RECEIVER)/metadata.yaml
	@# the simulated NVML's generic getters and the Go mock's selectors, from go-nvml's nvml.h
	$(GO) generate ./test/nvmltest
	@# the metric table of docs/reference/metrics.md, from metadata.yaml
	$(GO) run ./tools/metricstable -metadata $(RECEIVER)/metadata.yaml -doc docs/reference/metrics.md

GENERATED = find $(RECEIVER) \( -name 'generated_*.go' -o -name documentation.md -o -name README.md -o -path '*/internal/metadata/testdata/*' \) -type f | sort | xargs sha256sum

## check-generated: fail when the generated files differ from what metadata.yaml gives, or the generic getters from nvml.h
## or the metric table of docs/reference/metrics.md
check-generated: $(MDATAGEN)
	@before=$$($(GENERATED)); \
	$(MDATAGEN) $(RECEIVER)/metadata.yaml; \
	after=$$($(GENERATED)); \
	if [ "$$before" != "$$after" ]; then \
		diff <(echo "$$before") <(echo "$$after") || true; \
		echo "generated files were out of date with metadata.yaml: run 'make generate' and commit"; exit 1; \
	fi; echo "generated files match metadata.yaml"
	@$(GO) run ./test/fakenvml/gen -check && echo "the generic getters (test/fakenvml/getters_gen.*, test/nvmltest/selectors_gen.go) match nvml.h"
	@$(GO) run ./tools/metricstable -metadata $(RECEIVER)/metadata.yaml -doc docs/reference/metrics.md -check

## unit: go test -race ./... (this module, test/docs among it), and the receiver without cgo
unit:
	$(GO) test -race -count=1 ./...
	CGO_ENABLED=0 $(GO) test -count=1 ./receiver/... ./internal/nvmlclient/... ./internal/attribution/

## build: build the otelcol-nvml distribution with ocb
build: $(OTELCOL)

$(OTELCOL): $(OCB) builder-config.yaml go.mod go.sum $(shell git ls-files '*.go')
	@# -e: ocb's `go mod tidy` must get past contrib test-only deps the proxy lacks;
	@# any GOFLAGS from the environment are kept.
	GOFLAGS="$${GOFLAGS:+$$GOFLAGS }-e=true" $(OCB) --config builder-config.yaml

## report: build otelcol-nvml-report (tools/report: GPU-hours, cost and advice from Prometheus;
## docs/operations/report.md) into _build/
REPORT := $(DIST_DIR)/otelcol-nvml-report
report: $(REPORT)

# Pure Go (no NVML): built without cgo, so one binary runs on any glibc.
$(REPORT): go.mod go.sum $(wildcard tools/report/*.go internal/report/*.go)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o $@ ./tools/report

## run: build otelcol-nvml and run it with the default config
run: build
	$(OTELCOL) --config $(CONFIG)

## smoke: start the built collector with the default config and check it serves, and that its log stays quiet
smoke: build
	$(GO) test -tags smoke -count=1 -v ./test/smoke -otelcol=$(OTELCOL) -config=$(CURDIR)/$(CONFIG)

## bench: the scrape benchmark over the 8-GPU dgxh200 mock
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./$(RECEIVER)/ ./internal/nvmlclient/...

## fmt: gofmt -w every Go file
fmt:
	gofmt -w $$(git ls-files '*.go')

## clean: remove .bin/ (the pinned tools) and _build/ (every build output)
clean:
	rm -rf $(BIN) $(DIST_DIR)

## h200-bundle: the binaries for tools/h200/h200-run.sh, cost.sh and new-figures.sh, gzipped into .carry/ (see docs/runs/h200-runs.md)
h200-bundle: build
	@mkdir -p .carry
	$(GO) test -c -tags h200probe -ldflags='-s -w' -o .carry/scrapecost ./$(RECEIVER)/internal/scrapecost/
	$(GO) test -c -tags h200probe -ldflags='-s -w' -o .carry/receivercost.test ./$(RECEIVER)/
	$(GO) test -c -tags h200probe -ldflags='-s -w' -o .carry/nvmlclientprobe.test ./internal/nvmlclient/
	$(GO) test -c -tags h200probe -ldflags='-s -w' -o .carry/collectprobe.test ./internal/nvmlclient/collect/
	cp $(OTELCOL) .carry/otelcol-nvml
	gzip -f -6 .carry/otelcol-nvml .carry/scrapecost .carry/receivercost.test .carry/nvmlclientprobe.test .carry/collectprobe.test
	@ls -l .carry

# The folder h200-alert-bundle fills: .carry by default.
ALERT_CARRY ?= .carry

## h200-alert-bundle: .carry/ for tools/h200/alert-run.sh alone (emptied first): otelcol-nvml, otelcol-nvml-report,
## Prometheus and Alertmanager (PROMETHEUS, ALERTMANAGER) gzipped; the rules rendered with deploy/standalone/values.yaml
## and tools/h200/alert-values.yaml (short durations); the shipped Alertmanager config, its receivers webhooks
## (docs/runs/h200-runs.md)
h200-alert-bundle: build report $(HELM)
	rm -rf $(ALERT_CARRY) && mkdir -p $(ALERT_CARRY)
	$(MAKE) --no-print-directory rules-render VALUES="deploy/standalone/values.yaml tools/h200/alert-values.yaml" OUT=$(ALERT_CARRY)/rules.yaml
	python3 tools/h200/alert-bundle.py deploy/alertmanager/alertmanager.yml $(ALERT_CARRY)/alertmanager.yml
	$(AMTOOL) check-config $(ALERT_CARRY)/alertmanager.yml
	cp $(OTELCOL) $(REPORT) $(ALERT_CARRY)/
	cp $(PROMETHEUS) $(ALERT_CARRY)/prometheus
	cp $(ALERTMANAGER) $(ALERT_CARRY)/prometheus-alertmanager
	@# Debian's Alertmanager reads its templates from its package's folder.
	mkdir -p $(ALERT_CARRY)/amtmpl && cp /usr/share/prometheus/alertmanager/*.tmpl $(ALERT_CARRY)/amtmpl/
	gzip -f -6 $(ALERT_CARRY)/otelcol-nvml $(ALERT_CARRY)/otelcol-nvml-report $(ALERT_CARRY)/prometheus $(ALERT_CARRY)/prometheus-alertmanager
	@ls -l $(ALERT_CARRY)
	@test $$(du -cb $(ALERT_CARRY)/* | tail -1 | cut -f1) -lt 62914560 || { echo "$(ALERT_CARRY)/ is over 60 MiB"; exit 1; }

# ---- the simulated NVML (test/fakenvml), the e2e suite and the demo ----

FAKENVML_DIR  := $(DIST_DIR)/fakenvml
FAKENVML      := $(FAKENVML_DIR)/libnvidia-ml.so.1
FAKENVML_SRCS := $(sort $(wildcard test/fakenvml/*.c))
# The getter table's default values, one JSON file for the Go mock (go:embed) and
# the fake (a C string written into the build folder).
FAKENVML_DEFAULTS := $(FAKENVML_DIR)/getters_defaults.c
FAKENVML_DEPS := $(FAKENVML_SRCS) $(wildcard test/fakenvml/*.h) test/fakenvml/exports.map go.mod $(FAKENVML_DEFAULTS)
# go-nvml ships the nvml.h the fake is compiled against (the ABI go-nvml calls).
GONVML_DIR     = $(shell $(GO) list -m -f '{{.Dir}}' github.com/NVIDIA/go-nvml)
# cJSON (Debian: libcjson-dev) goes in statically where libcjson.a exists, so
# that the .so carries it; Debian 12 ships only the shared libcjson.so.1.
CJSON_A        = $(shell $(CC) -print-file-name=libcjson.a)
CJSON_LIBS     = $(if $(filter /%,$(CJSON_A)),$(CJSON_A),-lcjson)
FAKENVML_CFLAGS := -std=gnu11 -O2 -g -fPIC -Wall -Wextra -Werror -Wno-deprecated-declarations
PROMETHEUS    ?= $(or $(shell command -v prometheus 2>/dev/null),/usr/bin/prometheus)
PROMTOOL      ?= $(or $(shell command -v promtool 2>/dev/null),/usr/bin/promtool)
# Debian's prometheus-alertmanager: the server (not on PATH) and amtool.
ALERTMANAGER  ?= /usr/bin/prometheus-alertmanager
AMTOOL        ?= $(or $(shell command -v amtool 2>/dev/null),/usr/bin/amtool)
# Prometheus 3, the OTLP backend of the e2e suite (TestPrometheus3OTLP): built once into _build,
# without its service discoveries (remove_all_sd keeps file and http; the tests push OTLP and
# scrape static targets), which halves the build: 5.4 CPU-minutes cold.
PROMETHEUS3_VERSION := v0.316.0
PROMETHEUS3   := $(DIST_DIR)/prometheus3-$(PROMETHEUS3_VERSION)-nosd/prometheus
DEMO_SCENARIO ?= testdata/scenarios/demo.json

## fakenvml: build the simulated libnvidia-ml.so.1 into _build/fakenvml/
fakenvml: $(FAKENVML)

$(FAKENVML_DEFAULTS): test/nvmltest/getters.json
	@mkdir -p $(@D)
	{ echo '/* Written by the Makefile from test/nvmltest/getters.json. */'; echo '#include "fakenvml.h"'; \
		echo 'const char fake_getter_defaults[] ='; \
		sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/' $<; echo ';'; } >$@.tmp
	mv $@.tmp $@

$(FAKENVML): $(FAKENVML_DEPS)
	@echo '#include <cjson/cJSON.h>' | $(CC) -E -x c - >/dev/null 2>&1 || \
		{ echo "the simulated NVML needs cJSON: apt-get install libcjson-dev (Fedora: dnf install cjson-devel)"; exit 1; }
	@mkdir -p $(FAKENVML_DIR)
	$(CC) $(FAKENVML_CFLAGS) -I$(GONVML_DIR)/pkg/nvml -Itest/fakenvml -shared -o $@ \
		-Wl,-soname,libnvidia-ml.so.1 -Wl,-z,nodelete -Wl,-z,defs \
		-Wl,--version-script=test/fakenvml/exports.map \
		$(FAKENVML_SRCS) $(FAKENVML_DEFAULTS) $(CJSON_LIBS) -lm -lpthread

# Prometheus 3 into _build, only when missing.
$(PROMETHEUS3):
	@mkdir -p $(@D)
	GOBIN=$(@D) $(GO) install -tags remove_all_sd github.com/prometheus/prometheus/cmd/prometheus@$(PROMETHEUS3_VERSION)

# A real kube-apiserver and etcd for the DRA scenarios (TestDRA: the ResourceSlices), built from
# test/kubeapi, a module of its own (k8s.io/kubernetes needs its staging modules replaced): about
# 4 CPU-minutes cold, once.
KUBEAPI_DIR    := $(DIST_DIR)/kubeapi
KUBE_APISERVER := $(KUBEAPI_DIR)/kube-apiserver
ETCD           := $(KUBEAPI_DIR)/etcd

## kubeapi: build kube-apiserver and etcd (pinned in test/kubeapi/go.mod) into _build/kubeapi/
kubeapi: $(KUBE_APISERVER) $(ETCD)

$(KUBE_APISERVER) $(ETCD) &: test/kubeapi/go.mod test/kubeapi/go.sum test/kubeapi/etcd/main.go
	@mkdir -p $(KUBEAPI_DIR)
	cd test/kubeapi && $(GO) build -o $(KUBEAPI_DIR)/ k8s.io/kubernetes/cmd/kube-apiserver ./etcd

## e2e: the built collector on the simulated NVML, end to end: a backend collector, Prometheus, faults
e2e: build $(FAKENVML) $(PROMETHEUS3) $(KUBE_APISERVER) $(ETCD) $(REPORT) $(HELM)
	@test -x $(PROMETHEUS) || { echo "prometheus not found at $(PROMETHEUS): apt-get install prometheus, or set PROMETHEUS="; exit 1; }
	@test -x $(ALERTMANAGER) || { echo "Alertmanager not found at $(ALERTMANAGER): apt-get install prometheus-alertmanager, or set ALERTMANAGER="; exit 1; }
	$(GO) vet -tags e2e ./test/e2e
	$(GO) test -tags e2e -count=1 -v -timeout 10m ./test/e2e \
		-otelcol=$(OTELCOL) -fakenvml=$(FAKENVML) -prometheus=$(PROMETHEUS) -prometheus3=$(PROMETHEUS3) -gonvml=$(GONVML_DIR) \
		-kube-apiserver=$(KUBE_APISERVER) -etcd=$(ETCD) -report=$(REPORT) -alertmanager=$(ALERTMANAGER) -helm=$(HELM)

## soak: the fault soak (issue 9) for SOAK_DURATION (10m) at 200 ms against the built collector on the
## simulated NVML; its figures go to _build/soak-report.md (make test runs a 60 s one in e2e)
SOAK_DURATION ?= 10m
soak: build $(FAKENVML)
	$(GO) test -tags e2e -count=1 -v -timeout 30m -run '^TestSoak$$' ./test/e2e \
		-otelcol=$(OTELCOL) -fakenvml=$(FAKENVML) -soak.duration=$(SOAK_DURATION) -soak.report=$(DIST_DIR)/soak-report.md

## logvolume: the log-volume test (issue 16) for LOGVOLUME_DURATION (10m) at 200 ms, one call always failing and
## one flapping every 30 s: a handful of log lines (make test runs a 20 s one, flapping every 4 s, in e2e)
LOGVOLUME_DURATION ?= 10m
logvolume: build $(FAKENVML)
	$(GO) test -tags e2e -count=1 -v -timeout 30m -run '^TestLogVolume$$' ./test/e2e \
		-otelcol=$(OTELCOL) -fakenvml=$(FAKENVML) -logvolume.duration=$(LOGVOLUME_DURATION) -logvolume.flap=30s

DEMOKUBELET := $(DIST_DIR)/demokubelet
DEMO_PODS   ?= testdata/demo/pods.json

$(DEMOKUBELET): go.mod go.sum $(wildcard tools/demokubelet/*.go)
	$(GO) build -o $@ ./tools/demokubelet

DEMOWEBHOOK := $(DIST_DIR)/demowebhook

$(DEMOWEBHOOK): go.mod $(wildcard tools/demowebhook/*.go)
	$(GO) build -o $@ ./tools/demowebhook

## demo: otelcol-nvml on six SIMULATED GPUs (no GPU needed; go, gcc, libcjson-dev), with a simulated kubelet and,
## where Debian's prometheus is installed, a Prometheus with the shipped rules, and where prometheus-alertmanager
## is, an Alertmanager with the shipped routes whose notifications print in the terminal, all on 127.0.0.1
## (tools/demo.sh); Ctrl-C, or SIGINT or SIGTERM to the script's PID, stops it all
demo: build $(FAKENVML) $(DEMOKUBELET) $(DEMOWEBHOOK)
	OTELCOL=$(OTELCOL) FAKENVML=$(FAKENVML) DEMOKUBELET=$(DEMOKUBELET) DEMOWEBHOOK=$(DEMOWEBHOOK) PROMETHEUS=$(PROMETHEUS) \
		ALERTMANAGER=$(ALERTMANAGER) DEMO_SCENARIO=$(DEMO_SCENARIO) DEMO_PODS=$(DEMO_PODS) bash tools/demo.sh

## demo-check: make demo for DURATION (15m), asked through its Prometheus; fails when a GPU is reported degraded,
## a holder's diagnosis flaps or misses the state the demo plays, or a holder or README query has no data
## (tools/demo-check.sh; report in _build/demo-check)
demo-check: build $(FAKENVML) $(DEMOKUBELET) $(DEMOWEBHOOK)
	PROMETHEUS=$(PROMETHEUS) bash tools/demo-check.sh

# ---- deploy/: alert rules, Helm chart, image, dashboard ----

## rules: check the alert and recording rules and run their unit tests (firing, not firing, the `for:` boundary;
## the waste accounting's values and diagnosis states); then make alertmanager
rules: alertmanager
	@test -x $(PROMTOOL) || { echo "promtool not found at $(PROMTOOL): apt-get install prometheus, or set PROMTOOL="; exit 1; }
	$(PROMTOOL) check rules deploy/prometheus/rules.yaml deploy/prometheus/underused-rules.yaml deploy/prometheus/dcgm-compat.yaml
	cd deploy/prometheus && $(PROMTOOL) test rules rules_test.yaml waste_test.yaml diagnosis_test.yaml holders_test.yaml holder_alerts_test.yaml underused_test.yaml dcgm-compat_test.yaml fleet_test.yaml

## alertmanager: amtool check-config on deploy/alertmanager/alertmanager.yml, and amtool config routes test on
## each routing case of deploy/alertmanager/routes_test.txt (the receiver a label set must reach)
alertmanager:
	@test -x $(AMTOOL) || { echo "amtool not found at $(AMTOOL): apt-get install prometheus-alertmanager, or set AMTOOL="; exit 1; }
	$(AMTOOL) check-config deploy/alertmanager/alertmanager.yml
	@n=0; while read -r want labels; do \
		case $$want in ''|'#'*) continue ;; esac; n=$$((n + 1)); \
		got=$$($(AMTOOL) config routes test --config.file=deploy/alertmanager/alertmanager.yml $$labels 2>/dev/null) || true; \
		test "$$got" = "$$want" || { echo "routes_test.txt: {$$labels} routes to '$$got', want '$$want'"; exit 1; }; \
	done < deploy/alertmanager/routes_test.txt; echo "routes_test.txt: $$n routing cases pass"

## rules-render: the alert and recording rules with your thresholds and prices, without a cluster: the chart's
## PrometheusRule (helm template) with VALUES (deploy/standalone/values.yaml), as a plain Prometheus rules file in OUT
## (deploy/standalone/rules.yaml), checked by promtool (docs/operations/single-server.md)
VALUES ?= deploy/standalone/values.yaml
OUT    ?= deploy/standalone/rules.yaml
rules-render: $(HELM)
	$(HELM) template otelcol-nvml deploy/helm/otelcol-nvml --show-only templates/prometheusrule.yaml \
		$(foreach v,$(VALUES),-f $(v)) --set prometheusRule.enabled=true | $(GO) run ./tools/rulesrender -values "$(VALUES)" >$(OUT).tmp
	$(PROMTOOL) check rules $(OUT).tmp >/dev/null
	mv $(OUT).tmp $(OUT)
	@echo "$(OUT): the rules with $(VALUES)"

## rules-bench: the rules' evaluation cost per 1,000 GPUs on GPUS (50) simulated GPUs x 24 h backfilled into a
## Prometheus TSDB (tools/rulesbench; docs/operations/deploy.md "At scale"); a benchmark, not part of make test
GPUS ?= 50
RULES_BENCH_FLAGS ?=
rules-bench:
	$(GO) run ./tools/rulesbench -gpus $(GPUS) -prometheus $(PROMETHEUS) -promtool $(PROMTOOL) $(RULES_BENCH_FLAGS)

## rules-bench3: rules-bench on Prometheus 3 (built into _build from the module proxy), the version the
## docs' goal is met on; e.g. make rules-bench3 GPUS=400 RULES_BENCH_FLAGS="-history-step 10s -ahead 12m"
rules-bench3: $(PROMETHEUS3)
	$(MAKE) rules-bench PROMETHEUS=$(abspath $(PROMETHEUS3))

## deploy-check: helm lint + template (defaults and ci/*-values.yaml), strict decoding of every object into
## k8s.io/api and Prometheus Operator types, `otelcol-nvml validate` of every collector config, drift of the renderings,
## the probes against the running collector (pod IP; red on a receiver's permanent error)
deploy-check: $(HELM) $(OTELCOL) $(FAKENVML)
	cd test/deploy && $(GO) test -count=1 . -helm=$(HELM) -otelcol=$(OTELCOL) -fakenvml=$(FAKENVML)

## dashboard: regenerate deploy/grafana/otelcol-nvml.json from test/deploy/dashboard (deploy-check fails on drift)
dashboard:
	cd test/deploy && $(GO) run ./cmd/gendashboard -o $(CURDIR)/deploy/grafana/otelcol-nvml.json

## deploy-generate: rewrite deploy/kubernetes/otelcol-nvml.yaml from the chart
deploy-generate: $(HELM) $(OTELCOL)
	cd test/deploy && $(GO) test -count=1 . -run 'TestKubernetesManifests|TestUnderusedRuleFile' -helm=$(HELM) -otelcol=$(OTELCOL) -update

# ---- the container images (linux/amd64, linux/arm64) and the release ----

# The project's version, in ONE place: builder-config.yaml dist.version. The
# binaries, the image tag, the chart's version and appVersion (helm package
# sets both; test/deploy checks Chart.yaml against it) and the release tag
# (v$(VERSION), make check-version) follow it.
VERSION       := $(shell sed -n 's/^  version: *//p' builder-config.yaml)
PODMAN        ?= podman
# The image index (both platforms); each platform's image is $(IMAGE)-<arch>.
IMAGE         ?= localhost/otelcol-nvml:$(VERSION)
IMAGE_DIR     := $(DIST_DIR)/image
# The index and its two images, as one OCI archive (skopeo copy --all pushes it).
IMAGE_ARCHIVE := $(DIST_DIR)/otelcol-nvml-$(VERSION).oci.tar
IMAGE_SCENARIO ?= testdata/scenarios/demo.json
ARCHES        := amd64 arm64
arch_archive   = $(DIST_DIR)/otelcol-nvml-$(VERSION)-linux-$(1).oci.tar

# arm64: the cgo collector cross-built from ocb's generated module (_build,
# written by the amd64 build) with Debian's gcc-aarch64-linux-gnu and
# libc6-dev-arm64-cross, as ocb builds (-trimpath, stripped, no -race); the
# simulated NVML for arm64 against libcjson-dev:arm64 (Debian multiarch).
ARM64_CC       ?= aarch64-linux-gnu-gcc
ARM64_LIBDIR   := /usr/lib/aarch64-linux-gnu
OTELCOL_ARM64  := $(DIST_DIR)/linux-arm64/otelcol-nvml
FAKENVML_ARM64 := $(DIST_DIR)/fakenvml-arm64/libnvidia-ml.so.1
# make test sets NICE to `nice -n 19` for what it builds beside the checks.
NICE           ?=
QEMU_AARCH64   ?= $(or $(shell command -v qemu-aarch64-static 2>/dev/null),/usr/bin/qemu-aarch64-static)
otelcol_amd64  := $(OTELCOL)
otelcol_arm64  := $(OTELCOL_ARM64)
# otelcol-nvml-report beside it in the image and the packages (pure Go: a
# plain cross-build).
REPORT_ARM64   := $(DIST_DIR)/linux-arm64/otelcol-nvml-report
report_amd64   := $(REPORT)
report_arm64   := $(REPORT_ARM64)

$(REPORT_ARM64): go.mod go.sum $(wildcard tools/report/*.go internal/report/*.go)
	@mkdir -p $(@D)
	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o $@ ./tools/report

## build-arm64: cross-build otelcol-nvml for linux/arm64 into _build/linux-arm64/
build-arm64: $(OTELCOL_ARM64)

$(OTELCOL_ARM64): $(OTELCOL)
	@command -v $(ARM64_CC) >/dev/null || { echo "$(ARM64_CC) not found: apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross"; exit 1; }
	@mkdir -p $(@D)
	cd $(DIST_DIR) && GOOS=linux GOARCH=arm64 CC=$(ARM64_CC) $(NICE) $(GO) build -trimpath -ldflags='-s -w' -o $@ .

$(FAKENVML_ARM64): $(FAKENVML_DEPS)
	@echo '#include <cjson/cJSON.h>' | $(ARM64_CC) -E -x c - >/dev/null 2>&1 && test -e $(ARM64_LIBDIR)/libcjson.so || \
		{ echo "cJSON for arm64 not found: dpkg --add-architecture arm64; apt-get update; apt-get install libcjson-dev:arm64"; exit 1; }
	@mkdir -p $(@D)
	$(ARM64_CC) $(FAKENVML_CFLAGS) -I$(GONVML_DIR)/pkg/nvml -Itest/fakenvml -shared -o $@ \
		-Wl,-soname,libnvidia-ml.so.1 -Wl,-z,nodelete -Wl,-z,defs \
		-Wl,--version-script=test/fakenvml/exports.map \
		$(FAKENVML_SRCS) $(FAKENVML_DEFAULTS) -L$(ARM64_LIBDIR) -lcjson -lm -lpthread

## image: build the FROM scratch image for linux/amd64 and linux/arm64 with podman (nothing pulled, no
## registry), one image index over both, and write them as OCI archives (the index's and one per platform)
image: $(IMAGE_ARCHIVE)

# image_rule ARCH: the platform's rootfs (deploy/image/rootfs.sh), image and archive.
define image_rule
$(call arch_archive,$(1)): $(otelcol_$(1)) $(report_$(1)) deploy/image/Containerfile deploy/image/config.yaml deploy/image/rootfs.sh
	@command -v $(PODMAN) >/dev/null || { echo "podman not found: apt-get install podman buildah"; exit 1; }
	deploy/image/rootfs.sh $(otelcol_$(1)) deploy/image/config.yaml $(IMAGE_DIR)/$(1)/rootfs $(1) $(report_$(1))
	cp deploy/image/Containerfile $(IMAGE_DIR)/$(1)/Containerfile
	$(PODMAN) build --format oci --pull=never --platform linux/$(1) -t $(IMAGE)-$(1) -f $(IMAGE_DIR)/$(1)/Containerfile \
		--build-arg VERSION=$(VERSION) --build-arg REVISION=$$$$(git rev-parse HEAD) \
		--build-arg CREATED=$$$$(git log -1 --format=%cI) $(IMAGE_DIR)/$(1)
	rm -f $$@
	$(PODMAN) save --format oci-archive -o $$@ $(IMAGE)-$(1)
endef
$(foreach a,$(ARCHES),$(eval $(call image_rule,$(a))))

$(IMAGE_ARCHIVE): $(foreach a,$(ARCHES),$(call arch_archive,$(a)))
	$(PODMAN) manifest rm $(IMAGE) >/dev/null 2>&1 || $(PODMAN) rmi --force $(IMAGE) >/dev/null 2>&1 || true
	$(PODMAN) manifest create $(IMAGE)
	for a in $(ARCHES); do $(PODMAN) manifest add $(IMAGE) containers-storage:$(IMAGE)-$$a; done
	rm -f $@
	$(PODMAN) manifest push --all $(IMAGE) oci-archive:$@
	@ls -l $@ $^

## image-test: run both images on the simulated NVML (as root: podman mount, chroot): amd64 natively, arm64
## under qemu-user (qemu-aarch64-static inside the image's root) on the simulated NVML built for arm64
image-test: image $(FAKENVML) $(FAKENVML_ARM64)
	@test -x $(QEMU_AARCH64) || { echo "qemu-aarch64-static not found: apt-get install qemu-user-static"; exit 1; }
	$(GO) test -tags image -count=1 -v ./test/image -arch=amd64 -image=$(IMAGE)-amd64 -archive=$(call arch_archive,amd64) \
		-index=$(IMAGE_ARCHIVE) -fakenvml=$(FAKENVML) -libdir=/usr/lib/x86_64-linux-gnu \
		-scenario=$(abspath $(IMAGE_SCENARIO)) -podman=$$(command -v $(PODMAN))
	$(GO) test -tags image -count=1 -v ./test/image -arch=arm64 -image=$(IMAGE)-arm64 -archive=$(call arch_archive,arm64) \
		-index=$(IMAGE_ARCHIVE) -fakenvml=$(FAKENVML_ARM64) -libdir=$(ARM64_LIBDIR) -qemu=$(QEMU_AARCH64) \
		-scenario=$(abspath $(IMAGE_SCENARIO)) -podman=$$(command -v $(PODMAN))

# ---- the .deb and .rpm packages (deploy/packages; for hosts without Kubernetes) ----

PACKAGE_DIR   := $(DIST_DIR)/packages
PACKAGE_SRCS  := $(wildcard deploy/packages/*.* deploy/packages/scripts/*.sh)
rpm_arch_amd64 := x86_64
rpm_arch_arm64 := aarch64
deb_package    = $(PACKAGE_DIR)/otelcol-nvml_$(VERSION)-1_$(1).deb
rpm_package    = $(PACKAGE_DIR)/otelcol-nvml-$(VERSION)-1.$(rpm_arch_$(1)).rpm
PACKAGES      := $(foreach a,$(ARCHES),$(call deb_package,$(a)) $(call rpm_package,$(a)))

## packages: the otelcol-nvml .deb and .rpm for linux/amd64 and linux/arm64 with nfpm (deploy/packages/nfpm.yaml:
## the binary, the systemd unit, the config under /etc, the user created at install) into _build/packages/
packages: $(PACKAGES)

# package_rule ARCH FORMAT TARGET
define package_rule
$(3): $(otelcol_$(1)) $(report_$(1)) $(PACKAGE_SRCS) $(NFPM)
	@mkdir -p $$(@D)
	sed -e 's|$$$${PKG_ARCH}|$(1)|g' -e 's|$$$${PKG_VERSION}|$(VERSION)|g' -e 's|$$$${PKG_BINARY}|$(otelcol_$(1))|g' -e 's|$$$${PKG_REPORT}|$(report_$(1))|g' \
		deploy/packages/nfpm.yaml > $$@.nfpm.yaml
	$(NFPM) package --config $$@.nfpm.yaml --packager $(2) --target $$@
	rm $$@.nfpm.yaml
endef
$(foreach a,$(ARCHES),$(eval $(call package_rule,$(a),deb,$(call deb_package,$(a))))$(eval $(call package_rule,$(a),rpm,$(call rpm_package,$(a)))))

## package-test: check the packages in _build/packages (dpkg-deb, rpm -qp), install the .deb of this machine into a Debian root
## with dpkg --root, systemd-analyze verify and security its unit, run the installed collector there on the simulated
## NVML as the unit does (root: chroot); make release-check runs the same tests on the release's packages
package-test: $(PACKAGES) $(FAKENVML)
	cd test/deploy && $(GO) test -count=1 -v -run '^TestPackage' . -packages=$(PACKAGE_DIR) -fakenvml=$(FAKENVML)

# ---- the release (.github/workflows/release.yaml calls these targets; make test runs all but the pushes) ----

ACTIONLINT_VERSION     := v1.7.12
CYCLONEDX_GOMOD_VERSION := v1.10.0
ACTIONLINT    := $(BIN)/actionlint-$(ACTIONLINT_VERSION)
CYCLONEDX     := $(BIN)/cyclonedx-gomod-$(CYCLONEDX_GOMOD_VERSION)
RELEASE_DIR   := $(DIST_DIR)/release
# Where release-push puts the image and the chart (the workflow passes ghcr.io/<owner>).
REGISTRY      ?=

$(ACTIONLINT):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION)
	mv $(BIN)/actionlint $@

$(CYCLONEDX):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) $(NICE) $(GO) install github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$(CYCLONEDX_GOMOD_VERSION)
	mv $(BIN)/cyclonedx-gomod $@

## lint-workflows: actionlint on .github/workflows
lint-workflows: $(ACTIONLINT)
	$(ACTIONLINT) -no-color

## check-version: fail unless TAG (the pushed tag) is v$(VERSION)
check-version:
	@test "$(TAG)" = "v$(VERSION)" || { echo "tag '$(TAG)' is not v$(VERSION) (builder-config.yaml dist.version)"; exit 1; }
	@echo "version $(VERSION)"

## release-artifacts: _build/release/: the binaries per platform, the OCI archives (index and per platform),
## a CycloneDX SBOM per binary, the .deb and .rpm per platform, the chart package (version and appVersion
## $(VERSION)), SHA256SUMS
release-artifacts: $(OTELCOL) $(OTELCOL_ARM64) $(IMAGE_ARCHIVE) $(PACKAGES) $(HELM) $(CYCLONEDX)
	rm -rf $(RELEASE_DIR)
	mkdir -p $(RELEASE_DIR)
	$(foreach a,$(ARCHES),install -m 0755 $(otelcol_$(a)) $(RELEASE_DIR)/otelcol-nvml_$(VERSION)_linux_$(a) && \
		cp $(call arch_archive,$(a)) $(RELEASE_DIR)/ && \
		$(CYCLONEDX) bin -json -version v$(VERSION) -output $(RELEASE_DIR)/otelcol-nvml_$(VERSION)_linux_$(a).cdx.json \
			$(RELEASE_DIR)/otelcol-nvml_$(VERSION)_linux_$(a);)
	cp $(IMAGE_ARCHIVE) $(RELEASE_DIR)/
	cp $(PACKAGES) $(RELEASE_DIR)/
	$(HELM) package deploy/helm/otelcol-nvml --version $(VERSION) --app-version $(VERSION) -d $(RELEASE_DIR)
	cd $(RELEASE_DIR) && sha256sum $$(ls | grep -v '^SHA256SUMS$$') > SHA256SUMS
	@ls -l $(RELEASE_DIR)

## release-check: check _build/release (every file, checksums, SBOMs, the chart package's version, the
## binaries' platforms, the packages as package-test does) and check-version (the workflow's tag check:
## v$(VERSION) passes, another tag fails)
release-check: release-artifacts $(FAKENVML)
	$(MAKE) --no-print-directory check-version TAG=v$(VERSION)
	! $(MAKE) --no-print-directory check-version TAG=v$(VERSION).1 2>/dev/null
	cd test/deploy && $(GO) test -count=1 -run '^(TestRelease|TestPackage)' . -helm=$(HELM) -release=$(RELEASE_DIR) -version=$(VERSION) \
		-packages=$(RELEASE_DIR) -fakenvml=$(FAKENVML)

## release-push: push the image index and the chart to REGISTRY (the release workflow, after a login;
## never in make test); writes the index's digest to _build/release-image.digest for signing
release-push: $(HELM)
	@test -n "$(REGISTRY)" || { echo "set REGISTRY, e.g. ghcr.io/<owner>"; exit 1; }
	@test -s $(RELEASE_DIR)/SHA256SUMS || { echo "no $(RELEASE_DIR): make release-artifacts first"; exit 1; }
	cd $(RELEASE_DIR) && sha256sum -c SHA256SUMS
	skopeo copy --all --digestfile $(DIST_DIR)/release-image.digest \
		oci-archive:$(RELEASE_DIR)/$(notdir $(IMAGE_ARCHIVE)) docker://$(REGISTRY)/otelcol-nvml:$(VERSION)
	$(HELM) push $(RELEASE_DIR)/otelcol-nvml-$(VERSION).tgz oci://$(REGISTRY)/charts

## release-login: log skopeo and helm in to REGISTRY's host as REGISTRY_USER with $$REGISTRY_TOKEN (the workflow's token)
release-login: $(HELM)
	@test -n "$(REGISTRY)" && test -n "$${REGISTRY_USER:-}" && test -n "$${REGISTRY_TOKEN:-}" || \
		{ echo "set REGISTRY, REGISTRY_USER and REGISTRY_TOKEN"; exit 1; }
	@printenv REGISTRY_TOKEN | skopeo login $(firstword $(subst /, ,$(REGISTRY))) -u "$$REGISTRY_USER" --password-stdin
	@printenv REGISTRY_TOKEN | $(HELM) registry login $(firstword $(subst /, ,$(REGISTRY))) -u "$$REGISTRY_USER" --password-stdin
