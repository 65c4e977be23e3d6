# gapscope — make demo | make test | make bench | make fuzz
GO       ?= go
BIN      := bin/gapscope
PKGS     := ./...
FUZZTIME ?= 5s

.PHONY: all build deps demo test test-short bench fuzz fuzz-brief vet clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/gapscope

# deps installs the Debian packages gapscope's tests, labs and peer
# benchmarks use, only those missing.
deps:
	@./scripts/install-deps.sh

demo: deps build
	@./scripts/demo.sh

vet:
	$(GO) vet $(PKGS)

# test: everything, sandbox end-to-end tests included (-p 1: one package at a
# time, so that labs timing real servers do not compete for the 2 cores with
# another package's sandboxes), plus a brief run of
# every fuzz target.
test: build vet
	$(GO) test -count=1 -p 1 -timeout 40m $(PKGS)
	@$(MAKE) --no-print-directory fuzz-brief FUZZTIME=3s

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

clean:
	rm -rf bin
