# gapscope — make demo | make test | make bench | make fuzz
GO       ?= go
BIN      := bin/gapscope
PKGS     := ./...
FUZZTIME ?= 5s

.PHONY: all build deps demo test test-packet test-short race tidy-check bench fuzz fuzz-brief vet clean deb

all: build

# The binary names its VCS revision (gapscope version): go stamps it from a
# clone (-buildvcs=auto overrides a GOFLAGS=-buildvcs=false); from a git
# worktree, where go finds no repository, the linker flag carries it.
REVISION := $(shell git rev-parse --short=12 HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo +modified)

build:
	$(GO) build -buildvcs=auto -ldflags "-X main.buildRevision=$(REVISION)" -o $(BIN) ./cmd/gapscope

# deps installs the Debian packages gapscope's tests, labs and peer
# benchmarks use, only those missing.
deps:
	@./scripts/install-deps.sh

demo: deps build
	@./scripts/demo.sh

vet:
	$(GO) vet $(PKGS)
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "not gofmt-formatted: $$unformatted"; exit 1; fi

# test: go.mod tidy, everything, sandbox end-to-end tests included (-p 1:
# one package at a time, so that labs timing real servers do not compete for
# the 2 cores with another package's sandboxes), the race detector on the
# concurrent packages, plus a brief run of every fuzz target.
test: build vet tidy-check
	$(GO) test -count=1 -p 1 -timeout 40m $(PKGS)
	@$(MAKE) --no-print-directory test-packet
	@$(MAKE) --no-print-directory race
	@$(MAKE) --no-print-directory fuzz-brief FUZZTIME=3s

# test-packet runs labs that exercise the capture hard (a slow reader, a
# busy server, a 20 MB INSERT) again with the AF_PACKET ring: the suite
# above runs watch with its default source, auto, which is the header-only
# eBPF capture on loopback wherever the server's statement rows are read
# (and the ring where they are not, or off loopback).
CAPTURE_TESTS := TestSlowClientLab|TestBusyLabSlowStatementsJoined|TestHugeRequestJoined
test-packet:
	GAPSCOPE_CAPTURE=packet $(GO) test -count=1 -p 1 -timeout 20m -run '^($(CAPTURE_TESTS))$$' ./internal/lab ./internal/watch

# tidy-check fails when go.mod or go.sum differ from what go mod tidy would
# write; -diff prints the difference and changes no file.
tidy-check:
	$(GO) mod tidy -diff

# RACE_PKGS are the packages built on goroutines: the live engine, the
# join and capture it feeds from, the report it renders while running, the
# slow-log reader's parser goroutine, and the sinks when they exist.
RACE_PKGS := $(foreach p,watch join txn capture report collect/slowlog export web,$(if $(wildcard internal/$(p)/*.go),./internal/$(p)))

# race runs their short tests under the race detector (it needs cgo: gcc).
race:
	CGO_ENABLED=1 $(GO) test -race -short -count=1 $(RACE_PKGS)

test-short:
	$(GO) test -short -count=1 $(PKGS)

bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

fuzz:
	@$(MAKE) --no-print-directory fuzz-brief FUZZTIME=60s

# fuzz-brief runs each Fuzz* target for FUZZTIME (go test allows one target
# per invocation).
fuzz-brief:
	@./scripts/fuzz.sh $(FUZZTIME)

# deb writes $(DIST)/gapscope_<version>_amd64.deb (packaging/build-deb.sh):
# the binary, a systemd unit for watch, /etc/default/gapscope, man pages and
# shell completions.
DIST ?= dist
deb:
	@./packaging/build-deb.sh $(DIST)

clean:
	rm -rf bin
