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

# The bundled demo model (models/demo, committed): a small Gemma 4 trained on the King James Bible and WordNet
# (docs/demo-model.md; scripts/train-demo/ retrains it).
demo: build
	@test -f $(DEMO)/config.json || { echo "$(DEMO)/config.json is missing: the demo model is part of the repository (git checkout -- models/)" >&2; exit 1; }

# Serves the demo model with its assistant drafter (OpenAI + Anthropic API, docs/api.md); Ctrl-C drains and stops.
# Real checkpoints are served the same way: build/tern serve /path/to/gemma-4-e2b-it
run: demo
	@printf '\nOnce the server says it is serving, open http://$(HOST):$(PORT)/ in a browser to chat, or try\n'
	@printf '(the demo knows word meanings and Bible verses):\n'
	@printf '  curl -s http://$(HOST):$(PORT)/v1/chat/completions -H "Content-Type: application/json" \\\n'
	@printf '    -d '"'"'{"messages":[{"role":"user","content":"What does harbor mean?"}],"max_tokens":64}'"'"'\n\n'
	$(BUILD)/tern serve $(DEMO) --draft-model $(DEMO)-assistant --host $(HOST) --port $(PORT)

# The tern binary, libtern.so / libtern.a, include/tern/*.h, tern.pc (pkg-config) and the assets, under PREFIX.
PREFIX ?= /usr/local
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(BUILD_ASAN)
