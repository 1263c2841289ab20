# tern — front door. `make run` and `make test` install what they need, build, then do their job.
BUILD      ?= build
BUILD_ASAN ?= build-asan
JOBS       ?= $(shell nproc)
DEMO       ?= models/demo
HOST       ?= 127.0.0.1
PORT       ?= 8080

.PHONY: all deps build test test-asan run demo install clean

all: build

# Dependencies are checked (and what is missing installed) once, and again only when the list or the npm lock
# changes; `make deps` checks now.
DEPS_STAMP := $(BUILD)/.deps-checked
$(DEPS_STAMP): scripts/install-deps tests/oracles/package-lock.json
	@scripts/install-deps
	@mkdir -p $(BUILD) && touch $@

deps:
	@scripts/install-deps
	@mkdir -p $(BUILD) && touch $(DEPS_STAMP)

build: $(DEPS_STAMP)
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan: $(DEPS_STAMP)
	@cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=Debug -DTERN_SANITIZE=ON >/dev/null
	@cmake --build $(BUILD_ASAN) -j $(JOBS)
	cd $(BUILD_ASAN) && ctest --output-on-failure -j $(JOBS)

# The bundled demo model: tiny Gemma 4 shape, real vocabulary and chat template, made once.
demo: build
	@test -f $(DEMO)/config.json || $(BUILD)/tern synth --preset tiny --dtype bf16 --seed 1 $(DEMO)

# Serves the demo model (OpenAI + Anthropic API, docs/api.md); Ctrl-C drains and stops. Real checkpoints are
# served the same way: build/tern serve /path/to/gemma-4-e2b-it
run: demo
	@printf '\nOnce the server says it is serving, try (the demo model has random weights: real tokens, gibberish text):\n'
	@printf '  curl -s http://$(HOST):$(PORT)/v1/chat/completions -H "Content-Type: application/json" \\\n'
	@printf '    -d '"'"'{"messages":[{"role":"user","content":"Hello!"}],"max_tokens":32}'"'"'\n\n'
	$(BUILD)/tern serve $(DEMO) --host $(HOST) --port $(PORT)

# The tern binary, libtern.so / libtern.a, include/tern/*.h, tern.pc (pkg-config) and the assets, under PREFIX.
PREFIX ?= /usr/local
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(BUILD_ASAN)
