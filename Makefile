# tensorgate — make | make run | make test | make bench | make fuzz | make install
#
# Sources are found by wildcard, by layer (docs/ARCHITECTURE.md): a new lib/**.c
# joins libtensorgate.a, a new common/*.c or server/LAYER/*.c joins libtgserver.a,
# a new cmd/*.c joins the binary (never libtgserver.a), a new tests/unit/**/X.c
# becomes a test program, a new tests/fuzz/fuzz_X.c a fuzz target, a new bench/X.c
# a benchmark. scripts/layer-check.sh enforces which layer may include which.

BUILD ?= build
SAN ?= 0
# Builds run in parallel, a job per core, unless the command line says -jN.
ifeq ($(filter -j%,$(MAKEFLAGS)),)
MAKEFLAGS += -j$(shell nproc 2>/dev/null || echo 2)
endif
CC ?= cc
PREFIX ?= /usr/local
FUZZ_SECONDS ?= 60

PKGS := libmicrohttpd sqlite3 jansson yaml-0.1 libcmark libcrypto libcurl libpq
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

# The CUDA backend compiles against the toolkit's cuda.h when present; the driver
# itself is loaded at run time with dlopen, so the binary never links libcuda.
CUDA_INCLUDE ?= /usr/local/cuda/include
HAVE_CUDA_H := $(shell test -f $(CUDA_INCLUDE)/cuda.h && echo 1)
ifeq ($(HAVE_CUDA_H),1)
CUDA_CFLAGS := -DTG_HAVE_CUDA_H -isystem $(CUDA_INCLUDE)
endif

WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wvla -Wformat=2
CFLAGS ?= -O2 -g
# Every layer folder is on the include path: headers are named by their base name
# (unique across the tree), and scripts/layer-check.sh resolves each name to its layer.
LAYERS := lib lib/sniff common server/storage server/ingest server/jobs server/preload server/core server/routes cmd clients/c
INCLUDES := $(LAYERS:%=-I%)
ALL_CFLAGS := -std=c11 -D_GNU_SOURCE -pthread $(WARN) $(CFLAGS) $(INCLUDES) $(PKG_CFLAGS) $(CUDA_CFLAGS)
LDLIBS := $(PKG_LIBS) -lpthread -ldl -lm

ifeq ($(SAN),1)
BUILD := build-asan
SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
ALL_CFLAGS += $(SANFLAGS) -O1
LDFLAGS += $(SANFLAGS)
endif

LIB_SRC := $(sort $(wildcard lib/*.c lib/*/*.c))
LIB_HDR := $(sort $(wildcard lib/*.h lib/*/*.h))
SERVER_SRC := $(sort $(wildcard common/*.c server/*/*.c))
CMD_SRC := $(sort $(filter-out cmd/main.c,$(wildcard cmd/*.c)))
UNIT_SRC := $(sort $(wildcard tests/unit/*/*.c tests/unit/*/*/*.c))
PROPERTY_SRC := $(sort $(wildcard tests/property/*.c))
# tests/integration/harness.c is no program: compiled once into HARNESS_A (below).
INTEGRATION_SRC := $(sort $(filter-out tests/integration/harness.c,$(wildcard tests/integration/*.c)))
BENCH_SRC := $(sort $(wildcard bench/*.c))
FUZZ_SRC := $(sort $(wildcard tests/fuzz/fuzz_*.c))

LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
SERVER_OBJ := $(SERVER_SRC:%.c=$(BUILD)/%.o) $(BUILD)/gen/openapi_yaml.o $(BUILD)/gen/web_index_html.o $(BUILD)/gen/web_app_js.o $(BUILD)/gen/web_style_css.o $(BUILD)/gen/migrations.o $(BUILD)/gen/migrations_pg.o
MIGRATIONS := $(sort $(wildcard migrations/*.sql))
MIGRATIONS_PG := $(sort $(wildcard migrations/postgresql/*.sql))
LIB_A := $(BUILD)/libtensorgate.a
SERVER_A := $(BUILD)/libtgserver.a
# The commands (cmd/: serve, validate, inspect, convert, token, gc, fsck) apart
# from main: the binary and the command tests link it; libtgserver.a never does.
CMD_OBJ := $(CMD_SRC:%.c=$(BUILD)/%.o)
CMD_A := $(BUILD)/libtgcmd.a
# The preload client library for colocated consumers (C, and Python through ctypes),
# with the common/ helpers it uses compiled in (it links nothing of the server).
CLIENT_SRC := $(sort $(wildcard clients/c/*.c)) common/io.c common/sha256.c common/test_hooks.c
CLIENT_A := $(BUILD)/libtgclient.a
CLIENT_SO := $(BUILD)/libtgclient.so
BIN := $(BUILD)/tensorgate
# The test hooks (common/test_hooks.h) exist only in test builds: libtgserver.a
# holds common/test_hooks.c compiled without them (every hook reads as unset, no
# hook's name is in $(BIN)); the same file compiled with -DTG_TEST_HOOKS, linked
# before the archives, gives $(TEST_BIN) (the binary the integration harness
# runs) and the unit tests their hooks. One object differs; nothing else builds twice.
TEST_HOOKS_OBJ := $(BUILD)/test-hooks/test_hooks.o
TEST_BIN := $(BUILD)/tensorgate-test
# The integration harness (tests/integration/harness.h), compiled once per build:
# the integration programs and the route tests (tests/unit/server/routes) link it.
HARNESS_OBJ := $(BUILD)/tests/integration/harness.o
HARNESS_A := $(BUILD)/tests/integration/libharness.a
UNIT_BIN := $(UNIT_SRC:%.c=$(BUILD)/%)
PROPERTY_BIN := $(PROPERTY_SRC:%.c=$(BUILD)/%)
INTEGRATION_BIN := $(INTEGRATION_SRC:%.c=$(BUILD)/%)
BENCH_BIN := $(BENCH_SRC:%.c=$(BUILD)/%)
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=build-fuzz/%)

.PHONY: all deps deps-run run test check-fast check-build test-binaries bench fuzz install clean format format-check lint

all: $(BIN) $(LIB_A) $(CLIENT_A) $(CLIENT_SO)

deps:
	@scripts/install-deps.sh

# make run needs only the build and what the README walk-through runs (install-deps.sh --run)
deps-run:
	@scripts/install-deps.sh --run

run: deps-run
	@$(MAKE) --no-print-directory all
	$(BIN) serve

# make test: install what is missing, build normally and under ASan+UBSan, run every suite.
test: deps
	@$(MAKE) --no-print-directory test-binaries
	@$(MAKE) --no-print-directory SAN=1 test-binaries
	@$(MAKE) --no-print-directory fuzz-build
	scripts/run-tests.sh

# The benchmarks are built (so they keep compiling) in the normal build only: make
# bench runs them there, and nothing runs them under the sanitizers.
# make check-fast: the inner loop of day-to-day work (the normal build, the unit and
# property programs, the HTTP cases): well under a minute once built.
check-fast:
	@$(MAKE) --no-print-directory test-binaries
	TG_TEST_FAST=1 scripts/run-tests.sh

test-binaries: $(BIN) $(TEST_BIN) $(CMD_A) $(LIB_A) $(CLIENT_A) $(CLIENT_SO) $(UNIT_BIN) $(PROPERTY_BIN) $(INTEGRATION_BIN) $(if $(filter 1,$(SAN)),,$(BENCH_BIN))

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/gen/openapi_yaml.c: openapi.yaml scripts/embed.sh
	@mkdir -p $(dir $@)
	scripts/embed.sh $< tg_openapi_yaml $@

# The web page (server/routes/web.c): web/index.html -> tg_web_index_html, ...
# A static pattern rule: a plain one would also offer itself to make's built-in
# '%: %.c' for the included build/gen/web_*.d files (build/gen/web_x.d.c).
WEB_GEN := $(BUILD)/gen/web_index_html.c $(BUILD)/gen/web_app_js.c $(BUILD)/gen/web_style_css.c
$(WEB_GEN): $(BUILD)/gen/web_%.c: scripts/embed.sh
	@mkdir -p $(dir $@)
	scripts/embed.sh $(WEB_FILE_$*) tg_web_$* $@
WEB_FILE_index_html := web/index.html
WEB_FILE_app_js := web/app.js
WEB_FILE_style_css := web/style.css
$(BUILD)/gen/web_index_html.c: web/index.html
$(BUILD)/gen/web_app_js.c: web/app.js
$(BUILD)/gen/web_style_css.c: web/style.css

# Every migrations/NNNN_*.sql, in order, as the table tg_migrations (common/embedded.h).
$(BUILD)/gen/migrations.c: $(MIGRATIONS) scripts/embed.sh scripts/embed-migrations.sh
	@mkdir -p $(dir $@)
	scripts/embed-migrations.sh $@ $(MIGRATIONS)

# The PostgreSQL dialect of the same numbers (migrations/postgresql/), as tg_migrations_pg.
$(BUILD)/gen/migrations_pg.c: $(MIGRATIONS_PG) scripts/embed.sh scripts/embed-migrations.sh
	@mkdir -p $(dir $@)
	scripts/embed-migrations.sh $@ --table tg_migrations_pg $(MIGRATIONS_PG)

$(BUILD)/gen/migrations.o $(BUILD)/gen/migrations_pg.o: common/embedded.h

$(BUILD)/gen/%.o: $(BUILD)/gen/%.c
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(LIB_A): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(SERVER_A): $(SERVER_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(CMD_A): $(CMD_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(CLIENT_A): $(CLIENT_SRC:%.c=$(BUILD)/%.o)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(CLIENT_SO): $(CLIENT_SRC) clients/c/libtgclient.map
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fPIC -shared $(LDFLAGS) -Wl,--version-script=clients/c/libtgclient.map -o $@ $(CLIENT_SRC) $(shell pkg-config --libs jansson libcurl libcrypto) -lpthread

$(BIN): $(BUILD)/cmd/main.o $(CMD_A) $(CLIENT_A) $(SERVER_A) $(LIB_A)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(TEST_HOOKS_OBJ): common/test_hooks.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -DTG_TEST_HOOKS -MMD -MP -c $< -o $@

$(TEST_BIN): $(BUILD)/cmd/main.o $(TEST_HOOKS_OBJ) $(CMD_A) $(CLIENT_A) $(SERVER_A) $(LIB_A)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# Test and bench programs compile and link in one step; DEPFLAGS writes the
# headers each one includes (test.h, harness.h, lib/, server/ ...) to $@.d, so
# a change to any of them rebuilds the program (the .d files are included below).
DEPFLAGS = -MMD -MP -MF $@.d -MT $@

# Unit tests may call the commands too (tests/unit/cmd, the allocation walk).
$(BUILD)/tests/unit/%: tests/unit/%.c $(TEST_HOOKS_OBJ) $(CMD_A) $(CLIENT_A) $(SERVER_A) $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(DEPFLAGS) -Itests/unit $(LDFLAGS) -o $@ $< $(TEST_HOOKS_OBJ) $(CMD_A) $(CLIENT_A) $(SERVER_A) $(LIB_A) $(LDLIBS)

# The route tests are black-box tests of server/routes/X.c through the harness
# against the real binary (one server per program); they link the harness too.
$(BUILD)/tests/unit/server/routes/%: tests/unit/server/routes/%.c $(HARNESS_A) $(TEST_HOOKS_OBJ) $(CMD_A) $(SERVER_A) $(LIB_A) $(CLIENT_A)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(DEPFLAGS) -Itests/unit -Itests/integration $(LDFLAGS) -o $@ $< $(HARNESS_A) $(TEST_HOOKS_OBJ) $(CMD_A) $(SERVER_A) $(LIB_A) $(CLIENT_A) $(LDLIBS)

$(BUILD)/tests/property/%: tests/property/%.c $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(DEPFLAGS) -Itests/unit $(LDFLAGS) -o $@ $< $(LIB_A) $(LDLIBS)

$(HARNESS_OBJ): tests/integration/harness.c tests/integration/harness.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -Itests/integration -Itests/unit -c $< -o $@

$(HARNESS_A): $(HARNESS_OBJ)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/tests/integration/%: tests/integration/%.c tests/integration/harness.h $(HARNESS_A) $(LIB_A) $(CLIENT_A)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(DEPFLAGS) -Itests/integration -Itests/unit $(LDFLAGS) -o $@ $< $(HARNESS_A) $(CLIENT_A) $(LIB_A) $(LDLIBS)

$(BUILD)/bench/%: bench/%.c $(SERVER_A) $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(DEPFLAGS) $(LDFLAGS) -o $@ $< $(SERVER_A) $(LIB_A) $(LDLIBS)

# libFuzzer targets: clang, ASan+UBSan. The lib sources are compiled once, with
# coverage (fuzzer-no-link), into build-fuzz/libtensorgate-fuzz.a; each target
# is its own file plus what it drives, linked against it.
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_CFLAGS := -std=c11 -D_GNU_SOURCE -g -O1 $(INCLUDES) $(FUZZ_SAN) $(shell pkg-config --cflags jansson)
FUZZ_LIB_A := build-fuzz/libtensorgate-fuzz.a
FUZZ_LIBS := $(FUZZ_LIB_A) $(shell pkg-config --libs jansson) -lm
build-fuzz/obj/%.o: %.c $(LIB_HDR)
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@
$(FUZZ_LIB_A): $(LIB_SRC:%.c=build-fuzz/obj/%.o)
	rm -f $@ && ar rcs $@ $^
build-fuzz/%: tests/fuzz/%.c $(FUZZ_LIB_A) $(LIB_HDR)
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_LIBS)

# fuzz_http also drives the server's pure HTTP parsing (no libmicrohttpd, no daemon).
FUZZ_HTTP_SRC := server/core/http_parse.c server/core/checks.c
build-fuzz/fuzz_http: tests/fuzz/fuzz_http.c $(FUZZ_LIB_A) $(FUZZ_HTTP_SRC:%.c=build-fuzz/obj/%.o) server/core/http_parse.h server/core/checks.h
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_HTTP_SRC:%.c=build-fuzz/obj/%.o) $(FUZZ_LIBS)

# fuzz_range drives server/core/checks.c's Range parser.
build-fuzz/fuzz_range: tests/fuzz/fuzz_range.c $(FUZZ_LIB_A) build-fuzz/obj/server/core/checks.o server/core/checks.h
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< build-fuzz/obj/server/core/checks.o $(FUZZ_LIBS)

# fuzz_model_sig drives common/model_sig.c (bundles: JSON, base64, OpenSSL) with the
# common/ helpers it calls.
FUZZ_MSIG_SRC := common/model_sig.c common/sha256.c common/io.c common/test_hooks.c
build-fuzz/fuzz_model_sig: tests/fuzz/fuzz_model_sig.c $(FUZZ_LIB_A) $(FUZZ_MSIG_SRC:%.c=build-fuzz/obj/%.o) common/model_sig.h
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_MSIG_SRC:%.c=build-fuzz/obj/%.o) $(FUZZ_LIBS) -lcrypto -lpthread

.PHONY: fuzz-build
fuzz-build: $(FUZZ_BIN)

fuzz: deps fuzz-build
	scripts/run-fuzz.sh $(FUZZ_SECONDS)

bench: $(BIN)
	@scripts/install-deps.sh --bench
	@$(MAKE) --no-print-directory test-binaries
	bench/run.sh

install: all
	install -D -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/tensorgate
	install -D -m 0644 $(CLIENT_SO) $(DESTDIR)$(PREFIX)/lib/libtgclient.so
	install -D -m 0644 clients/c/tg_preload_client.h $(DESTDIR)$(PREFIX)/include/tg_preload_client.h
	install -D -m 0644 $(CLIENT_A) $(DESTDIR)$(PREFIX)/lib/libtgclient.a
	install -D -m 0644 clients/c/tensorgate_client.h $(DESTDIR)$(PREFIX)/include/tensorgate_client.h

# Every C source and header the project owns, for format and format-check.
FORMAT_FILES = $(sort $(wildcard lib/*.[ch] lib/*/*.[ch] common/*.[ch] server/*/*.[ch] cmd/*.[ch] clients/c/*.[ch] \
	bench/*.c tests/unit/*.h tests/unit/*/*.c tests/unit/*/*/*.c tests/property/*.c tests/integration/*.[ch] \
	tests/fuzz/*.c))

format:
	clang-format -i $(FORMAT_FILES)

# Fails when a file differs from what clang-format (the repository's .clang-format) would write.
format-check:
	clang-format --dry-run -Werror $(FORMAT_FILES)

# cppcheck, then clang-tidy (the checks of .clang-tidy, every finding an error)
# with the build's flags, two files at a time; a file whose preprocessed text has
# not changed since its last clean run is not checked again (scripts/lint-tidy.sh).
TIDY_SRC = $(sort $(wildcard lib/*.c lib/*/*.c common/*.c server/*/*.c cmd/*.c clients/c/*.c))
TIDY_FLAGS = -std=c11 -D_GNU_SOURCE -pthread $(INCLUDES) $(PKG_CFLAGS) $(CUDA_CFLAGS)
CLANG_TIDY ?= clang-tidy-14

lint:
	cppcheck --quiet --error-exitcode=1 --enable=warning,portability --inline-suppr $(INCLUDES) lib common server cmd
	@echo "clang-tidy: $(words $(TIDY_SRC)) files"
	@printf '%s\n' $(TIDY_SRC) | xargs -P2 -I{} scripts/lint-tidy.sh $(CLANG_TIDY) {} -- $(TIDY_FLAGS)

clean:
	rm -rf build build-asan build-fuzz

-include $(LIB_OBJ:.o=.d) $(SERVER_OBJ:.o=.d) $(CMD_OBJ:.o=.d) $(CLIENT_SRC:%.c=$(BUILD)/%.d) $(BUILD)/cmd/main.d
-include $(TEST_HOOKS_OBJ:.o=.d) $(UNIT_BIN:=.d) $(PROPERTY_BIN:=.d) $(INTEGRATION_BIN:=.d) $(BENCH_BIN:=.d) $(HARNESS_OBJ:.o=.d)
