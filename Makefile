# clustereval — set up, demo and test from a fresh clone (Debian 12, root or sudo for packages).
VENV        ?= .venv
PY          := $(VENV)/bin/python
BIN         := $(VENV)/bin
SIM_DIR     ?= $(CURDIR)/.sim/demo
SIM_NODES   ?= 4
SIM_PROFILE ?= reference
DEB_PACKAGES := openssh-server openssh-client slurm-wlm slurm-client munge fio iperf3 iputils-ping iproute2 procps python3 prometheus-node-exporter sshfs glusterfs-server glusterfs-client nftables pciutils openmpi-bin sudo \
               postgresql chromium prometheus-pushgateway
APT_STAMP   := $(VENV)/.apt-packages
PIP_STAMP   := $(VENV)/.pip-installed
# Small fio runs and a short mesh for the demo: a real run on a provider uses the role defaults (4 GiB and
# 15 s of fio, 10 s per direction of every pair).
DEMO_VARS   := -e clustereval_storage_fio_size_mib=256 -e clustereval_storage_fio_runtime_s=3 \
               -e clustereval_network_mesh_duration_s=3

.PHONY: install demo test lint unit integration sim-up sim-down sim-status benchmark clean

install: $(APT_STAMP) $(PIP_STAMP)
	@# Byte-compile the editable sources: with PYTHONDONTWRITEBYTECODE set, every ansible-playbook run
	@# would otherwise compile the checks and parsers from source again.
	@$(PY) -m compileall -q src plugins >/dev/null

$(APT_STAMP):
	@missing=""; for p in $(DEB_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q $$missing; \
	fi
	@mkdir -p $(VENV) && touch $@

$(PIP_STAMP): pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip 2>/dev/null || true
	$(PY) -m pip install -q -e '.[dev]'
	@touch $@

demo: install
	@$(BIN)/clustereval sim down --dir $(SIM_DIR) >/dev/null 2>&1 || true
	$(BIN)/clustereval sim up --nodes $(SIM_NODES) --profile $(SIM_PROFILE) --dir $(SIM_DIR)
	@status=0; $(BIN)/clustereval evaluate -i $(SIM_DIR)/inventory.ini $(DEMO_VARS) || status=$$?; \
	$(BIN)/clustereval sim down --dir $(SIM_DIR); exit $$status

sim-up: install
	$(BIN)/clustereval sim up --nodes $(SIM_NODES) --profile $(SIM_PROFILE) --dir $(SIM_DIR)

sim-down:
	$(BIN)/clustereval sim down --dir $(SIM_DIR)

sim-status:
	$(BIN)/clustereval sim status --dir $(SIM_DIR)

lint: install
	$(BIN)/ruff check src plugins tests benchmarks
	$(BIN)/ansible-lint

unit: install
	$(BIN)/pytest -q -m "not integration" tests

integration: install
	$(BIN)/pytest -q -m integration tests

test: lint
	$(BIN)/pytest -q --durations=30 tests

benchmark: install
	$(PY) benchmarks/evaluate_sim.py
	$(PY) benchmarks/fuzz_parsers.py
	$(PY) benchmarks/session_cost.py

clean:
	rm -rf .pytest_cache .ruff_cache runs .sim
