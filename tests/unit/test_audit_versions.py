"""Security minimum versions: the version comparisons, the table loader and every audit.versions check.

Probe outputs are written here in the layout of the real tools (nvcc 13.0 banner as printed on this
machine, ``runc --version``, ``nvidia-ctk --version``, ``dcgmi -v`` as in the corpus, dpkg-query rows).
Minimums asserted come from the packaged table, read through the loader, never restated as numbers
where the test is about the table's contract.
"""

from __future__ import annotations

import datetime as dt
import http.server
import threading

import pytest
import yaml

from clustereval import security_table
from clustereval.checks.audit_versions import dcgm_versions, driver_from_proc
from clustereval.security_table import TableError, compare, parse_version
from tests.conftest import read_corpus
from tests.helpers import judge, probe

TODAY = "2026-08-25"  # a few days after the packaged table was generated: fresh, grace windows closed

# ------------------------------------------------------------------------------------------ helpers

NVCC_13_0 = ("nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-2025 NVIDIA Corporation\n"
             "Built on Wed_Aug_20_01:58:59_PM_PDT_2025\nCuda compilation tools, release 13.0, V13.0.88\n"
             "Build cuda_13.0.r13.0/compiler.36424714_0")
NVCC_13_1 = NVCC_13_0.replace("13.0", "13.1").replace("V13.1.88", "V13.1.80")
PROC_550 = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.90.07  Release Build  "
            "(dvs-builder@U16-I3-B03-4-3)  Tue May 28 21:55:11 UTC 2024\n"
            "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14+deb12u1) \n")
UBUNTU_NOBLE = 'PRETTY_NAME="Ubuntu 24.04.2 LTS"\nNAME="Ubuntu"\nVERSION_ID="24.04"\nID=ubuntu\n'
DEBIAN_12 = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nVERSION_ID="12"\nID=debian\n'


def inventory(**sections: str | None) -> str:
    """The versions probe's stdout: a section per keyword (None: absent), the rest empty/absent."""
    base: dict[str, str | None] = {
        "nvcc": None, "nvidia-ctk": None, "runc": None, "docker": None, "dockerd": None,
        "dcgm-exporter": None, "virtnet": None, "dpkg": "", "rpm": None, "driver": "", "nvidia-pci": "",
        "ib": "", "uname": "6.1.0-18-amd64", "os-release": DEBIAN_12, "boot": "", "hpc-sdk": ""}
    base.update({k.replace("_", "-"): v for k, v in sections.items()})
    out = []
    for name, body in base.items():
        if body is None:
            out.append(f"### {name} absent")
            continue
        rc = 0
        if isinstance(body, tuple):
            body, rc = body
        out += [f"### {name}", *([body] if body else []), f"### {name} rc={rc}"]
    return "\n".join(out) + "\n"


def probes(text: str, rc: int = 0, **extra) -> dict:
    return probe("versions_inventory", text, rc, cmd="sh -c …", artifact="raw/n1/versions-inventory.txt", **extra)


def run(check_id: str, probe_set: dict | None = None, **options) -> dict:
    options.setdefault("today", TODAY)
    return judge(check_id, probe_set, **options)


def dcgmi_probe(body: str | tuple[str, int] | None) -> dict:
    """The health area's ``dcgmi -v`` probe (None: dcgmi not installed)."""
    text, rc = body if isinstance(body, tuple) else (body or "", 0)
    return probe("health_dcgmi_version", text, 127 if body is None else rc, cmd="dcgmi -v", missing=body is None,
                 artifact="raw/n1/dcgmi-version.txt")


def grade(check_id: str, **sections) -> dict:
    dcgmi = sections.pop("dcgmi", None)
    return run(check_id, {**probes(inventory(**sections)), **dcgmi_probe(dcgmi)})


TABLE = security_table.packaged()


def comp(name: str) -> dict:
    return TABLE.component(name)


def just_below(version: str) -> str:
    """The release just below ``version``: 1.19.1 -> 1.19.0, 13.1 -> 13.0, 29.7.0 -> 29.7.0-rc.1."""
    parts = version.split(".")
    if parts[-1] == "0":
        return f"{version}-rc.1"
    parts[-1] = str(int(parts[-1]) - 1)
    return ".".join(parts)


# ------------------------------------------------------------------------------------------ versions


class TestVersionParsing:
    @pytest.mark.parametrize(("older", "newer"), [
        ("580.99.01", "580.159.03"),      # lexical order would say the opposite
        ("1.5.0-rc.3", "1.5.0"),          # a stable release outranks its own rc
        ("1.5.0-rc.3", "1.5.0-rc.4"),
        ("1.9.0~rc.2", "1.9.0-rc.3"),     # Debian's ~rc spelling
        ("1.9.3-rc.9", "1.9.3"),
        ("1.17.0~rc.1", "1.17.0"),
        ("1.2.0.rc1", "1.2.0"),
        ("29.7.0-rc.1", "29.7.0"),
        ("13.0.88", "13.1"),              # missing fields count as zero
        ("1.0.0-beta.2", "1.0.0-rc.1"),
    ])
    def test_ordering(self, older, newer):
        assert compare(parse_version(older), parse_version(newer)) == -1
        assert compare(parse_version(newer), parse_version(older)) == 1

    @pytest.mark.parametrize(("text", "same_as"), [
        ("1:1.3.3-0ubuntu1~22.04.3", "1.3.3"),          # epoch and distro revision dropped
        ("5:29.7.0-1~ubuntu.24.04~noble", "29.7.0"),
        ("1.19.1-1", "1.19.1"),
        ("V13.1.80", "13.1.80"),
        ("runc version 1.1.12", "1.1.12"),
    ])
    def test_packaging_noise_is_ignored(self, text, same_as):
        assert compare(parse_version(text), parse_version(same_as)) == 0

    @pytest.mark.parametrize("text", ["", "N/A", "[N/A]", "unknown", "not-found", None, "ERR!", "no digits"])
    def test_unreadable_is_none(self, text):
        assert parse_version(text) is None

    def test_go_version_inside_a_word_is_not_taken(self):
        assert parse_version("go1.20.13") is None
        assert parse_version("commit: none\ngo: go1.20.13\nrunc 1.1.12").parts == (1, 1, 12)


class TestTableContract:
    """For every minimum of the packaged table the minimum passes and the release below it fails."""

    def test_every_driver_branch(self):
        for branch, entry in comp("nvidia_driver")["branches"].items():
            minimum = entry["minimum"]
            assert TABLE.assess("nvidia_driver", minimum, dt.date(2027, 1, 1)).state == "pass", branch
            assert TABLE.assess("nvidia_driver", just_below(minimum), dt.date(2027, 1, 1)).state == "fail"

    @pytest.mark.parametrize("name", ["cuda_toolkit", "container_toolkit", "docker_engine", "dcgm",
                                      "dcgm_exporter", "hpc_sdk"])
    def test_every_single_minimum(self, name):
        minimum = comp(name)["minimum"]
        assert TABLE.assess(name, minimum, dt.date(2027, 1, 1)).state == "pass"
        assert TABLE.assess(name, just_below(minimum), dt.date(2027, 1, 1)).state == "fail"

    def test_every_runc_rung(self):
        for rung, entry in comp("runc")["rungs"].items():
            minimum = str(entry["minimum"])
            assert TABLE.assess("runc", minimum, dt.date(2027, 1, 1)).state == "pass", rung
            below = parse_version(minimum)
            if below.is_prerelease:
                below_text = f"{'.'.join(map(str, below.parts))}-rc.{below.pre[1] - 1}"
            elif below.parts[-1] == 0:
                continue  # x.y.0 has nothing below it on its own line
            else:
                below_text = just_below(minimum)
            assert TABLE.assess("runc", below_text, dt.date(2027, 1, 1)).state == "fail", below_text

    def test_every_firmware_train(self):
        for train, entry in comp("nic_firmware")["trains"].items():
            patch = int(entry["minimum"])
            assert TABLE.assess("nic_firmware", f"28.{train}.{patch}", dt.date(2027, 1, 1)).state == "pass"
            assert TABLE.assess("nic_firmware", f"28.{train}.{patch - 1}", dt.date(2027, 1, 1)).state == "fail"

    @pytest.mark.parametrize("name", ["rocm", "amdgpu_driver", "rccl"])
    def test_every_amd_rung(self, name):
        rungs = comp(name)["rungs"]
        for rung, entry in rungs.items():
            minimum = str(entry["minimum"])
            assert TABLE.assess(name, minimum, dt.date(2027, 1, 1)).state == "pass", rung
            assert TABLE.assess(name, just_below(minimum), dt.date(2027, 1, 1)).state == "fail", rung
            assert entry["url"].startswith("https://") and entry["advisory"]

    def test_rccl_lines_between_and_around_the_rungs(self):
        today = dt.date(2027, 1, 1)
        assert TABLE.assess("rccl", "2.20.5", today).state == "fail"      # ROCm 6.2's RCCL: older than every line
        assert TABLE.assess("rccl", "2.24.3", today).state == "unknown"   # a line no maintained ROCm shipped
        assert TABLE.assess("rccl", "2.28.3", today).state == "pass"      # newer than the ladder
        assert TABLE.assess("rccl", "2.26.6", today).selector == "2.26"

    def test_table_is_dated(self):
        assert TABLE.generated is not None and TABLE.origin == security_table.PACKAGED


class TestComparisonTraps:
    today = dt.date(2027, 1, 1)

    @pytest.mark.parametrize(("version", "state"), [
        ("575.57.08", "unknown"),     # R575 is not R570: never graded against 570's minimum
        ("550.90.07", "unknown"),     # end-of-life branch, no fix listed
        ("595.84", "unknown"),        # Windows-style version of a listed branch
        ("610.10.01", "pass"),        # branch newer than the table
        ("6.16.13", "unknown"),       # amdgpu version string
        ("9999.1.1", "unknown"),
        ("580.99.01", "fail"),
        ("470.256.02", "fail"),       # older than every supported branch: end of life
        ("525.147.05", "fail"),
    ])
    def test_driver(self, version, state):
        assert TABLE.assess("nvidia_driver", version, self.today).state == state

    @pytest.mark.parametrize(("version", "state"), [
        ("1.5.0-rc.3", "pass"), ("1.5.0-rc.4", "pass"), ("1.5.0", "pass"), ("1.5.0~rc.2", "fail"),
        ("1.9.0", "pass"),            # above the ladder
        ("0.0.9", "fail"),            # below the ladder
        ("1:1.3.3-0ubuntu1~22.04.3", "fail"),  # distro rebuild of 1.3.3 is still 1.3.3
    ])
    def test_runc_ladder(self, version, state):
        assert TABLE.assess("runc", version, self.today).state == state

    @pytest.mark.parametrize(("version", "state"), [
        ("28.39.1002", "fail"),       # CX-7 family 28, train 39: not "train 28"
        ("22.39.8002", "pass"),       # CX-6 Dx, same train, fixed
        ("12.28.4702", "pass"),       # the family prefix is ignored
        ("40.47.2526", "pass"),       # a train newer than the table
        ("28.30.1000", "unknown"),    # an unlisted train between listed ones
        ("20.26.1040", "fail"),       # older than every train of the table: below the minimum
        ("46.3007", "unknown"),       # too short to be <family>.<train>.<patch>
    ])
    def test_firmware_trains(self, version, state):
        assert TABLE.assess("nic_firmware", version, self.today).state == state

    def test_dcgm_and_exporter_are_not_interchangeable(self):
        # 4.7.1 clears DCGM's minimum but not the exporter's: swapping the two fields would show.
        assert TABLE.assess("dcgm", "4.7.1", self.today).state == "pass"
        assert TABLE.assess("dcgm_exporter", "4.7.1", self.today).state == "fail"

    @pytest.mark.parametrize(("version", "line", "state"), [
        ("25.10.4", None, "unknown"),  # fixed for LTS25, not for GA: the line decides
        ("25.10.4", "LTS25", "pass"),
        ("25.10.4", "GA", "fail"),
        ("25.10.6", None, "pass"),
        ("24.10.49", None, "fail"),
        ("1.6.0", None, "fail"),       # legacy, affected through 1.7.21
        ("1.9.13", None, "unknown"),   # legacy after the affected range: not named fixed
    ])
    def test_virtio_release_lines(self, version, line, state):
        assert TABLE.assess("virtio_net", version, self.today, line=line).state == state

    def test_unreadable_version_is_unknown_never_pass(self):
        for name in ("nvidia_driver", "cuda_toolkit", "runc", "nic_firmware", "virtio_net"):
            assert TABLE.assess(name, "N/A", self.today).state == "unknown"
            assert TABLE.assess(name, None, self.today).state == "unknown"

    def test_ubuntu_kernel_abi(self):
        entry = comp("kernel")["entries"][0]
        abi = entry["minimum_abi"]
        assert TABLE.assess_distro_kernel("ubuntu", "24.04", f"6.8.0-{abi}-generic", self.today).state == "pass"
        assert TABLE.assess_distro_kernel("ubuntu", "24.04", f"6.8.0-{abi - 1}-generic",
                                          self.today).state == "fail"
        assert TABLE.assess_distro_kernel("ubuntu", "24.04", "6.11.0-29-generic", self.today) is None
        assert TABLE.assess_distro_kernel("debian", "12", "6.1.0-18-amd64", self.today) is None


class TestGrace:
    def table(self, **component) -> security_table.Table:
        data = {"generated": "2026-09-01", "grace_days": 3,
                "components": {"docker_engine": {"kind": "minimum", "minimum": "29.7.0", **component}}}
        return security_table.Table(security_table.validate(data, "test"), "test")

    def test_grace_is_its_own_state_within_the_window(self):
        table = self.table(published="2026-07-30")
        assert table.assess("docker_engine", "29.6.1", dt.date(2026, 8, 2)).state == "grace"
        assert table.assess("docker_engine", "29.6.1", dt.date(2026, 8, 2)).grace_until == "2026-08-02"
        assert table.assess("docker_engine", "29.6.1", dt.date(2026, 8, 3)).state == "fail"

    def test_future_effective_date_is_grace(self):
        table = self.table(published="2026-07-30", effective="2026-09-10")
        assert table.assess("docker_engine", "29.6.1", dt.date(2026, 9, 5)).state == "grace"

    def test_month_only_dates_give_no_grace(self):
        assert self.table(published="2026-07").assess("docker_engine", "29.6.1",
                                                      dt.date(2026, 7, 2)).state == "fail"


# ------------------------------------------------------------------------------------------ loader


def table_yaml(**changes) -> str:
    data = yaml.safe_load(
        (security_table.resources.files("clustereval") / security_table.PACKAGED).read_text())
    data.update(changes)
    return yaml.safe_dump(data)


class TestLoader:
    def setup_method(self):
        security_table._CACHE.clear()

    def test_packaged_by_default(self):
        assert security_table.load("").origin == security_table.PACKAGED

    def test_file_path(self, tmp_path):
        path = tmp_path / "t.yml"
        path.write_text(table_yaml(generated="2026-11-20"))
        assert security_table.load(str(path)).generated == dt.date(2026, 11, 20)

    def test_file_url(self, tmp_path):
        path = tmp_path / "t.yml"
        path.write_text(table_yaml(generated="2026-11-21"))
        assert security_table.load(path.as_uri()).generated == dt.date(2026, 11, 21)

    def test_http_url_on_loopback(self):
        body = table_yaml(generated="2026-11-22").encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            url = f"http://127.0.0.1:{server.server_address[1]}/minimums.yml"
            assert security_table.load(url).generated == dt.date(2026, 11, 22)
        finally:
            server.shutdown()

    def test_unreachable_url_is_an_error(self):
        with pytest.raises(TableError, match="could not fetch"):
            security_table.load("http://127.0.0.1:9/none.yml", timeout=2)

    @pytest.mark.parametrize("text", ["just a string", "components: {}\ngenerated: 2026-01-01\n",
                                      "generated: soon\ncomponents: {x: {kind: minimum}}\n", ": : :"])
    def test_malformed_tables_are_refused(self, tmp_path, text):
        path = tmp_path / "bad.yml"
        path.write_text(text)
        with pytest.raises(TableError):
            security_table.load(str(path))

    def test_unknown_scheme(self):
        with pytest.raises(TableError, match="only"):
            security_table.load("ftp://127.0.0.1/t.yml")


# ------------------------------------------------------------------------------------------ helpers


class TestProbeHelpers:
    def test_driver_from_proc_open_and_proprietary_module(self):
        assert driver_from_proc(PROC_550) == "550.90.07"
        assert driver_from_proc("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 "
                                "01:15:15 UTC 2023\n") == "535.104.05"

    def test_dcgmi_version_from_corpus(self):
        # the corpus file states "Version : 3.1.8" for both client and host engine
        text = read_corpus("dcgmi", "dcgmi-v-version-3.1.8.txt")
        assert dcgm_versions(text) == {"client": "3.1.8", "hostengine": "3.1.8"}

# ------------------------------------------------------------------------------------------ checks


class TestTableFresh:
    def test_pass_when_recent(self):
        result = run("audit.versions.table_fresh", today=TODAY)
        assert result["status"] == "pass" and result["subject"] == "n1"
        assert result["evidence"]["generated"] == TABLE.generated.isoformat()

    def test_warn_loudly_when_stale(self):
        result = run("audit.versions.table_fresh", today="2026-11-30")
        assert result["status"] == "warn" and result["summary"].startswith("STALE SECURITY TABLE")
        assert result["value"] == (dt.date(2026, 11, 30) - TABLE.generated).days

    def test_limit_is_data_and_overridable(self):
        result = run("audit.versions.table_fresh", today="2026-08-25",
                     baseline_overrides={"audit.versions.table_fresh": {"warn": 2}})
        assert result["status"] == "warn" and "override" in result["expected"]["source"]

    def test_warn_when_a_user_table_lowers_minimums(self, tmp_path):
        security_table._CACHE.clear()
        data = yaml.safe_load(table_yaml(generated="2026-08-24"))
        data["components"]["runc"]["rungs"]["1.2"]["minimum"] = "1.2.1"
        path = tmp_path / "lower.yml"
        path.write_text(yaml.safe_dump(data))
        result = run("audit.versions.table_fresh", security_table=str(path))
        assert result["status"] == "warn" and "runc 1.2: 1.2.1" in result["summary"]

    def test_error_when_the_table_cannot_be_read(self, tmp_path):
        result = run("audit.versions.table_fresh", security_table=str(tmp_path / "missing.yml"))
        assert result["status"] == "error" and "could not read" in result["summary"]

    def test_skip_outside_its_harnesses_is_impossible(self):
        assert run("audit.versions.table_fresh", harness="k8s")["status"] == "pass"


def gpu_probe(driver: str | None) -> dict:
    if driver is None:
        return probe("nvidia_smi_q_x", "", 127, cmd="nvidia-smi -q -x", missing=True, tool="nvidia-smi")
    xml = (f'<?xml version="1.0" ?>\n<nvidia_smi_log>\n\t<driver_version>{driver}</driver_version>\n'
           f"\t<cuda_version>12.4</cuda_version>\n\t<attached_gpus>0</attached_gpus>\n</nvidia_smi_log>\n")
    return probe("nvidia_smi_q_x", xml, cmd="nvidia-smi -q -x")


class TestNvidiaDriver:
    def check(self, driver_proc: str = "", smi: str | None = None, pci: str = "") -> dict:
        return run("audit.versions.nvidia_driver",
                   {**probes(inventory(driver=driver_proc, nvidia_pci=pci)), **gpu_probe(smi)})

    def test_pass(self):
        minimum = comp("nvidia_driver")["branches"]["580"]["minimum"]
        result = self.check(PROC_550.replace("550.90.07", minimum))
        assert result["status"] == "pass" and result["expected"]["selector"] == "R580"

    def test_a_module_and_library_that_disagree_are_both_named(self):
        # Upgraded without a reboot: the loaded module (what runs) is graded, the library is named beside it.
        minimum = comp("nvidia_driver")["branches"]["580"]["minimum"]
        result = self.check(PROC_550.replace("550.90.07", minimum), smi="580.999.01")
        assert result["status"] == "pass" and result["value"] == minimum
        assert f"nvidia-smi's library sees 580.999.01, while the loaded kernel module sees {minimum}" in \
            result["summary"] and "believed: the loaded kernel module" in result["summary"]
        assert result["evidence"]["agreement"]["believed"] == "the loaded kernel module"
        agreeing = self.check(PROC_550.replace("550.90.07", minimum), smi=minimum)
        assert "seen differently" not in agreeing["summary"]

    def test_fail_below_branch_minimum(self):
        result = self.check(PROC_550.replace("550.90.07", "580.82.07"))
        assert result["status"] == "fail" and "a_id" in result["summary"]
        assert result["expected"]["url"].startswith("https://")

    def test_warn_on_branch_not_in_table(self):
        result = self.check(PROC_550)
        assert result["status"] == "warn" and "R550" in result["summary"] and "not a pass" in result["summary"]

    def test_nvidia_smi_when_proc_is_unreadable(self):
        result = self.check("", smi="575.57.08")
        assert result["status"] == "warn" and result["evidence"]["read_from"] == "nvidia-smi -q -x"

    def test_warn_when_gpus_on_pci_but_no_driver(self):
        result = self.check("", None, pci="0000:19:00.0")
        assert result["status"] == "warn" and result["value"] is None

    def test_skip_without_gpu(self):
        result = self.check("", None)
        assert result["status"] == "skip" and "no NVIDIA GPU" in result["summary"]

    def test_error_when_probe_timed_out(self):
        result = run("audit.versions.nvidia_driver", probes("", rc=None, timed_out=True, timeout=60))
        assert result["status"] == "error" and "timed out" in result["summary"]

    def test_error_on_garbage(self):
        result = run("audit.versions.nvidia_driver", probes("\x00\x01 garbage\n"))
        assert result["status"] == "error"

    def test_error_when_the_table_is_unreadable(self, tmp_path):
        result = run("audit.versions.nvidia_driver", probes(inventory(driver=PROC_550)),
                     security_table=str(tmp_path / "nope.yml"))
        assert result["status"] == "error" and "unavailable" in result["summary"]


class TestSimpleComponents:
    """CUDA toolkit, container toolkit, runc, DCGM, exporter: pass / fail / grace / unknown / skip."""

    @pytest.mark.parametrize(("check_id", "section", "good", "bad", "unreadable"), [
        ("audit.versions.cuda_toolkit", "nvcc", NVCC_13_1, NVCC_13_0, "nvcc: error while loading"),
        ("audit.versions.container_toolkit", "nvidia_ctk",
         "NVIDIA Container Toolkit CLI version 1.19.1\ncommit: 5bd7b4f1",
         "NVIDIA Container Toolkit CLI version 1.17.0~rc.1\ncommit: 5bd7b4f1", "Segmentation fault"),
        ("audit.versions.runc", "runc",
         "runc version 1.3.6\ncommit: v1.3.6-0-g1a2b3c4\nspec: 1.2.1\ngo: go1.24.4\nlibseccomp: 2.5.5",
         "runc version 1.2.7\ncommit: v1.2.7-0-gdeadbee\nspec: 1.2.0\ngo: go1.23.8\nlibseccomp: 2.5.5",
         "runc: permission denied"),
        ("audit.versions.dcgm", "dcgmi", "\nVersion : 4.5.3\nBuild ID : 8\n",
         ("dcgmi", "dcgmi-v-version-3.1.8.txt"), "Error: connection refused"),
        ("audit.versions.dcgm_exporter", "dcgm_exporter", "dcgm-exporter version 4.5.3-4.8.2",
         "dcgm-exporter version 4.5.3-4.7.1", "flag provided but not defined: -version"),
    ])
    def test_statuses(self, check_id, section, good, bad, unreadable):
        if isinstance(bad, tuple):  # a corpus file, read here so a missing corpus skips only this case
            bad = read_corpus(*bad)
        assert grade(check_id, **{section: good})["status"] == "pass"
        failed = grade(check_id, **{section: bad})
        assert failed["status"] == "fail" and "vulnerable" in failed["summary"]
        unknown = grade(check_id, **{section: (unreadable, 1)})
        assert unknown["status"] == "warn" and "unknown" in unknown["summary"]
        skipped = grade(check_id)
        assert skipped["status"] == "skip"
        assert "not installed" in skipped["summary"] or "no CUDA Toolkit" in skipped["summary"]
        assert run(check_id, probes("", rc=None, timed_out=True, timeout=60))["status"] == "error"

    @staticmethod
    def login_env(path: str, version: str) -> dict:
        release = ".".join(version.split(".")[:2])
        text = (f"login_path=/usr/local/cuda/bin:/usr/bin\nlogin_nvcc={path}\nlogin_mpirun=\n"
                f"login_nvcc_release={release}\nlogin_nvcc_version={version}\n")
        return probe("software_batch_env", text, parser="probe-key-equals-value", cmd="bash -l -s …")

    def test_login_and_non_login_shells_that_disagree_are_both_named_and_graded(self):
        # The distro's /usr/bin/nvcc (13.0, vulnerable) comes first for `ssh node cmd`; a login shell gets
        # /usr/local/cuda/bin/nvcc 13.1. The verdict names both, says which it believes and grades both.
        text = inventory(nvcc=NVCC_13_0, nvcc_path="/usr/bin/nvcc")
        result = run("audit.versions.cuda_toolkit",
                     {**probes(text), **self.login_env("/usr/local/cuda/bin/nvcc", "13.1.80")})
        assert result["status"] == "fail" and result["value"] == "13.1.80"
        assert "believed: a login shell" in result["summary"] and "/usr/bin/nvcc 13.0.88" in result["summary"]
        agreement = result["evidence"]["agreement"]
        assert agreement["seen"] == {"a login shell": "13.1.80", "a non-login shell": "13.0.88"}
        assert agreement["believed"] == "a login shell"

    def test_shells_that_agree_say_nothing_about_it(self):
        text = inventory(nvcc=NVCC_13_1, nvcc_path="/usr/local/cuda/bin/nvcc")
        result = run("audit.versions.cuda_toolkit",
                     {**probes(text), **self.login_env("/usr/local/cuda/bin/nvcc", "13.1.80")})
        assert result["status"] == "pass" and "seen differently" not in result["summary"]
        assert "why" not in result["evidence"]["agreement"]

    def test_a_toolkit_only_a_login_shell_finds_is_graded(self):
        result = run("audit.versions.cuda_toolkit",
                     {**probes(inventory()), **self.login_env("/opt/cuda-12.9/bin/nvcc", "13.0.88")})
        assert result["status"] == "fail" and "/opt/cuda-12.9/bin/nvcc" in result["summary"]

    def test_cuda_is_the_toolkit_not_the_driver_cap(self):
        # nvidia-smi says "CUDA Version: 13.2" for the driver; the toolkit installed is what is graded
        result = grade("audit.versions.cuda_toolkit", nvcc=NVCC_13_0)
        assert result["value"] == "13.0.88" and result["evidence"]["read_from"] == "nvcc --version"

    def test_container_toolkit_from_the_package_when_no_cli(self):
        result = grade("audit.versions.container_toolkit",
                       dpkg="nvidia-container-toolkit\t1.19.1-1\tii ")
        assert result["status"] == "pass" and "dpkg" in result["evidence"]["read_from"]

    def test_grace_period_is_a_visible_warn(self, tmp_path):
        security_table._CACHE.clear()
        data = yaml.safe_load(table_yaml(generated="2026-08-24"))
        data["components"]["container_toolkit"]["published"] = "2026-08-23"
        path = tmp_path / "recent.yml"
        path.write_text(yaml.safe_dump(data))
        result = run("audit.versions.container_toolkit",
                     probes(inventory(nvidia_ctk="NVIDIA Container Toolkit CLI version 1.18.0\ncommit: x")),
                     security_table=str(path))
        assert result["status"] == "warn" and result["summary"].startswith("GRACE PERIOD, not a pass")
        assert result["evidence"]["state"] == "grace" and result["evidence"]["grace_until"] == "2026-08-26"

    def test_dcgm_grades_the_older_of_client_and_hostengine(self):
        text = "Version : 4.5.3\nBuild ID : 8\n\nHostengine build info:\nVersion : 4.4.2\nBuild ID : 1\n"
        result = grade("audit.versions.dcgm", dcgmi=(text, 0))
        assert result["status"] == "fail" and result["value"] == "4.4.2"


class TestDocker:
    def test_pass_on_server_version(self):
        assert grade("audit.versions.docker", docker="29.7.0", dockerd="Docker version 29.7.0, build 1")[
            "status"] == "pass"

    def test_fail_on_release_candidate_of_the_minimum(self):
        result = grade("audit.versions.docker", docker="29.7.0-rc.1")
        assert result["status"] == "fail"

    def test_client_version_is_never_graded(self):
        # the daemon is down: the installed dockerd binary is graded, not the CLI
        down = ("Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon "
                "running?", 1)
        result = grade("audit.versions.docker", docker=down, dockerd="Docker version 28.2.2, build e6534b4")
        assert result["status"] == "fail" and result["evidence"]["read_from"] == "dockerd --version"

    def test_skip_with_client_only(self):
        down = ("Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon "
                "running?", 1)
        result = grade("audit.versions.docker", docker=down)
        assert result["status"] == "skip" and "only the Docker client" in result["summary"]

    def test_warn_when_daemon_refuses_this_user(self):
        denied = ("permission denied while trying to connect to the Docker daemon socket at "
                  "unix:///var/run/docker.sock", 1)
        assert grade("audit.versions.docker", docker=denied)["status"] == "warn"

    def test_skip_without_docker(self):
        assert grade("audit.versions.docker")["status"] == "skip"

    def test_warn_on_unreadable_server_version(self):
        assert grade("audit.versions.docker", docker="<no value>")["status"] == "warn"


def ib(*rows: tuple[str, str, str]) -> str:
    return "\n".join(f"{dev}\t{fw}\t{hca}\tMT_0000001244" for dev, fw, hca in rows)


class TestNicFirmware:
    def test_pass(self):
        result = grade("audit.versions.nic_firmware", ib=ib(("mlx5_0", "28.46.3008", "MT4129"),
                                                            ("mlx5_1", "28.46.3008", "MT4129")))
        assert result["status"] == "pass" and result["value"] == ["28.46.3008"]

    def test_fail_names_the_device(self):
        result = grade("audit.versions.nic_firmware", ib=ib(("mlx5_0", "28.46.3008", "MT4129"),
                                                            ("mlx5_1", "28.39.1002", "MT4129")))
        assert result["status"] == "fail" and "mlx5_1 28.39.1002" in result["summary"]
        assert "mlx5_0" not in result["summary"]

    def test_unknown_train_is_warn(self):
        result = grade("audit.versions.nic_firmware", ib=ib(("mlx5_0", "28.30.1000", "MT4129")))
        assert result["status"] == "warn" and "not a pass" in result["summary"]

    def test_train_older_than_the_table_fails(self):
        result = grade("audit.versions.nic_firmware", ib=ib(("mlx5_0", "20.26.1040", "MT4123")))
        assert result["status"] == "fail" and "older than every train" in result["summary"]

    def test_unreadable_fw_is_warn(self):
        result = grade("audit.versions.nic_firmware",
                       ib=ib(("mlx5_0", "cat: /sys/class/infiniband/mlx5_0/fw_ver: Permission denied", "MT4129")))
        assert result["status"] == "warn"

    def test_skip_without_mellanox_adapters(self):
        result = grade("audit.versions.nic_firmware", ib=ib(("rxe0", "0.0.0", "")))
        assert result["status"] == "skip" and "rxe0" in result["summary"]

    def test_error_when_section_missing(self):
        result = run("audit.versions.nic_firmware", probes("### nvcc absent\n"))
        assert result["status"] == "error" and "no `ib` section" in result["summary"]


class TestKernelPending:
    def test_pass_when_running_the_newest(self):
        result = grade("audit.versions.kernel_pending", uname="6.8.0-124-generic",
                       dpkg="linux-image-6.8.0-124-generic\t6.8.0-124.124\tii \n"
                            "linux-image-6.8.0-100-generic\t6.8.0-100.100\tii ")
        assert result["status"] == "pass"

    def test_warn_when_newer_installed_not_booted(self):
        result = grade("audit.versions.kernel_pending", uname="6.8.0-100-generic",
                       dpkg="linux-image-6.8.0-124-generic\t6.8.0-124.124\tii \n"
                            "linux-image-6.8.0-100-generic\t6.8.0-100.100\tii \n"
                            "linux-image-6.8.0-130-lowlatency\t6.8.0-130.130\tii ")
        assert result["status"] == "warn" and "6.8.0-124-generic" in result["summary"]
        assert result["evidence"]["newest_installed"] == "6.8.0-124-generic"  # same flavour only

    def test_rpm_inventory(self):
        result = grade("audit.versions.kernel_pending", uname="5.14.0-427.13.1.el9_4.x86_64",
                       rpm="kernel-core\t5.14.0-503.11.1.el9_5.x86_64\tii ")
        assert result["status"] == "warn" and "reboot pending" in result["summary"]

    def test_unknown_inventory_is_not_a_pass(self):
        result = grade("audit.versions.kernel_pending", uname="6.18.44-fc-v657")
        assert result["status"] == "warn" and "not a pass" in result["summary"]

    def test_error_without_uname(self):
        assert grade("audit.versions.kernel_pending", uname="")["status"] == "error"

    def test_skip_impossible_but_missing_probe_is_error(self):
        assert run("audit.versions.kernel_pending", {})["status"] == "error"


class TestSimulatedBootImages:
    """The simulated node's /boot, as the versions area lays it out, read by the real check."""

    def test_running_kernel_image_is_listed_and_a_pending_one_is_newer(self):
        from clustereval.sim.overlays import versions

        assert versions.newer_kernel("6.18.44-fc-v657") == "6.18.45-fc-v657"
        assert versions.newer_kernel("6.8.0-124-generic") == "6.8.1-124-generic"
        assert versions.boot_images({}, "6.8.0-1-generic") == ["6.8.0-1-generic"]
        assert versions.boot_images({"faults": {"kernel_outside_os": True}}, "6.8.0-1-generic") == []
        images = versions.boot_images({"faults": {"kernel_pending": True}}, "6.18.44-fc-v657")
        boot = "".join(f"vmlinuz-{r}\n" for r in images)
        result = grade("audit.versions.kernel_pending", uname="6.18.44-fc-v657", boot=boot)
        assert result["status"] == "warn" and "6.18.45-fc-v657" in result["summary"]
        boot = "".join(f"vmlinuz-{r}\n" for r in versions.boot_images({}, "6.18.44-fc-v657"))
        assert grade("audit.versions.kernel_pending", uname="6.18.44-fc-v657", boot=boot)["status"] == "pass"


class TestKernelAdvisories:
    def test_pass_and_fail_on_ubuntu_noble(self):
        abi = comp("kernel")["entries"][0]["minimum_abi"]
        ok = grade("audit.versions.kernel_advisories", uname=f"6.8.0-{abi}-generic", os_release=UBUNTU_NOBLE)
        bad = grade("audit.versions.kernel_advisories", uname="6.8.0-100-generic", os_release=UBUNTU_NOBLE)
        assert ok["status"] == "pass"
        assert bad["status"] == "fail" and "USN-" in bad["summary"]

    def test_skip_on_other_distributions(self):
        result = grade("audit.versions.kernel_advisories", uname="6.1.0-18-amd64", os_release=DEBIAN_12)
        assert result["status"] == "skip" and "Debian" in result["summary"]

    def test_warn_when_no_abi(self):
        result = grade("audit.versions.kernel_advisories", uname="6.8.0-custom", os_release=UBUNTU_NOBLE)
        assert result["status"] == "warn"

    def test_error_without_os_release(self):
        assert grade("audit.versions.kernel_advisories", os_release="")["status"] == "error"


class TestVirtioNet:
    def test_pass_fail_unknown_from_virtnet(self):
        assert grade("audit.versions.virtio_net_bluefield", virtnet='{"version": "25.10.6"}')["status"] == "pass"
        assert grade("audit.versions.virtio_net_bluefield", virtnet='{"version": "24.10.49"}')["status"] == "fail"
        assert grade("audit.versions.virtio_net_bluefield", virtnet='{"version": "25.10.4"}')["status"] == "warn"

    def test_warn_when_bluefield_present_but_controller_unreadable(self):
        result = grade("audit.versions.virtio_net_bluefield", ib=ib(("mlx5_0", "32.46.3008", "MT41692")))
        assert result["status"] == "warn" and "attest" in result["summary"]

    def test_skip_without_bluefield(self):
        assert grade("audit.versions.virtio_net_bluefield",
                     ib=ib(("mlx5_0", "28.46.3008", "MT4129")))["status"] == "skip"


class TestHpcSdk:
    def test_statuses(self):
        current = comp("hpc_sdk")["current"]
        assert grade("audit.versions.hpc_sdk",
                     hpc_sdk=f"/opt/nvidia/hpc_sdk/Linux_x86_64/{current}")["status"] == "pass"
        old = grade("audit.versions.hpc_sdk", hpc_sdk=f"/opt/nvidia/hpc_sdk/Linux_x86_64/{current}\n"
                                                       "/opt/nvidia/hpc_sdk/Linux_x86_64/24.5")
        assert old["status"] == "fail" and "24.5" in old["summary"]
        assert grade("audit.versions.hpc_sdk")["status"] == "skip"
