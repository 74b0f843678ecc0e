# Two commands on a fresh machine: `make demo` and `make test`. Each builds .venv when needed.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# where bench writes RESULTS.md and results.json (CI points it at a temporary folder)
BENCH_OUT ?= bench

.PHONY: demo demo-spark test test-crash bench bench-quick prereqs test-packages test-disk clean

prereqs:
	@$(PYTHON) -c 'import sys; v=sys.version_info; sys.exit(0 if v >= (3, 11) else "flowactors needs Python 3.11 or newer; found %d.%d (set PYTHON=/path/to/python3.11)" % v[:2])'
	@command -v java >/dev/null 2>&1 || { echo "flowactors needs Java 17 for Spark (java not found on PATH; e.g. apt-get install openjdk-17-jre-headless)"; exit 1; }
	@java -version 2>&1 | head -n 1 | grep -Eq '"17[."]' || { echo "flowactors needs Java 17 for Spark; found: $$(java -version 2>&1 | head -n 1)"; exit 1; }

# system programs some tests drive: the web page's tests a real headless Chromium, the dashboard's
# a real Prometheus, the database tests a real PostgreSQL and MariaDB, the messaging tests a real Mosquitto and
# RabbitMQ (Debian packages). Installed here when we
# may (root with apt-get), else those tests skip with a message naming the packages. A service the
# package would start (Prometheus, PostgreSQL's cluster) is stopped and disabled: the tests start
# their own, on ports of their own.
test-packages:
	@missing=""; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium chromium-driver"; \
	command -v prometheus >/dev/null 2>&1 || missing="$$missing prometheus"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	{ command -v mosquitto || test -x /usr/sbin/mosquitto; } >/dev/null 2>&1 || missing="$$missing mosquitto"; \
	test -x /usr/lib/rabbitmq/bin/rabbitmq-server || missing="$$missing rabbitmq-server"; \
	{ command -v mariadbd || test -x /usr/sbin/mariadbd; } >/dev/null 2>&1 || missing="$$missing mariadb-server"; \
	if [ -z "$$missing" ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing what the browser and dashboard tests drive (apt-get install$$missing)"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null) \
	  || echo "WARNING: could not install$$missing; the tests that need them will be SKIPPED"; \
	  case "$$missing" in *prometheus*) systemctl disable --now prometheus >/dev/null 2>&1 || true;; esac; \
	  case "$$missing" in *postgresql*) (systemctl disable --now postgresql || service postgresql stop) >/dev/null 2>&1 || true;; esac; \
	  case "$$missing" in *mosquitto*) (systemctl disable --now mosquitto || service mosquitto stop) >/dev/null 2>&1 || true;; esac; \
	  case "$$missing" in *rabbitmq-server*) (systemctl disable --now rabbitmq-server || service rabbitmq-server stop) >/dev/null 2>&1 || true;; esac; \
	  case "$$missing" in *mariadb-server*) (systemctl disable --now mariadb || service mariadb stop) >/dev/null 2>&1 || true;; esac; \
	else echo "WARNING: no root to install$$missing (apt-get install$$missing); the tests that need them will be SKIPPED"; fi

$(STAMP): pyproject.toml
	@$(MAKE) --no-print-directory prereqs
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,spark]'
	@touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/demo.py

demo-spark: $(STAMP)
	$(PY) examples/spark_demo.py

# the suite writes up to about 4 GB at once in the temp folder (two tests stream a 2 GiB FlowFile;
# Ray builds a copy of .venv for each pip runtime_env, 1 GB each, removed at the end)
test-disk:
	@$(PY) -c 'import shutil, tempfile; t = tempfile.gettempdir(); free = shutil.disk_usage(t).free / 1e9; raise SystemExit(0 if free >= 5 else f"make test needs about 5 GB free in {t}; it has {free:.1f} GB: free some space there, or point TMPDIR at a larger disk")'

test: $(STAMP) test-packages test-disk
	$(PY) -m pytest -q --durations=15

test-crash: $(STAMP)
	$(PY) -m pytest -q -s -m cluster_crash

bench: $(STAMP)
	$(PY) -m bench --out $(BENCH_OUT)

bench-quick: $(STAMP)
	$(PY) -m bench --quick --out $(BENCH_OUT)

clean:
	rm -rf $(VENV) repository out bench/scratch .pytest_cache
