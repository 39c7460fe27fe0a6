"""Bad input to the CLI and the playbook gets a clear message and a non-zero exit, and what they print or
record is strict JSON (issue S): an empty phase list, a missing file, an inventory that names no host, a tool
printing an overflowing number."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from clustereval import cli, results
from tests.conftest import read_corpus

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / ".venv" / "bin"


def strict(text: str):
    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")
    return json.loads(text, parse_constant=refuse)


def test_parse_prints_strict_json_when_a_tool_overflows(tmp_path, capsys):
    doc = json.loads(read_corpus("iperf3", "iperf3-3.9-J-tcp-10s-omit3-retransmits-crlf.json"))
    doc["end"]["sum_received"]["bits_per_second"] = "OVERFLOW"
    text = json.dumps(doc).replace('"OVERFLOW"', "1e999")  # what a C printf of an overflowed double looks like
    (tmp_path / "out.json").write_text(text)
    assert cli.main(["parse", "iperf3", str(tmp_path / "out.json")]) == 0
    parsed = strict(capsys.readouterr().out)
    assert isinstance(parsed, dict)


def test_parse_of_a_missing_file_is_a_message_not_a_traceback(tmp_path, capsys):
    assert cli.main(["parse", "iperf3", str(tmp_path / "absent.json")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_a_results_line_never_holds_infinity(tmp_path):
    item = {"run_id": "r", "check": "network.mesh.rtt", "phase": "performance", "domain": "network",
            "subject": "n1->n2", "status": "pass", "severity": "minor", "summary": "x", "value": float("inf"),
            "evidence": {"samples": [1.0, float("nan")]}}
    results.append(tmp_path, [item])
    line = strict((tmp_path / results.RESULTS_FILE).read_text())
    assert line["value"] is None and line["evidence"]["samples"] == [1.0, None]


@pytest.mark.parametrize("phases", [" , ", ",", ""])
def test_evaluate_with_no_phase_refuses_before_anything_runs(phases, capsys, tmp_path):
    assert cli.main(["evaluate", "-i", str(tmp_path / "inv.ini"), "--phases", phases]) == 2
    assert "names no phase" in capsys.readouterr().err


@pytest.mark.skipif(not (BIN / "ansible-playbook").exists(), reason="ansible is not installed in .venv")
def test_the_playbook_refuses_an_inventory_with_no_host(tmp_path):
    proc = subprocess.run([str(BIN / "ansible-playbook"), str(REPO / "playbooks/evaluate.yml"),
                           "-i", str(tmp_path / "no-such-inventory.ini"), "-e", f"clustereval_out={tmp_path / 'run'}"],
                          capture_output=True, text=True, timeout=120, cwd=REPO,
                          env={"PATH": f"{BIN}:/usr/bin:/bin", "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
                               "ANSIBLE_NOCOLOR": "1", "HOME": str(tmp_path)})
    assert proc.returncode != 0
    assert "no host of the inventory matches" in proc.stdout + proc.stderr
    assert not (tmp_path / "run" / "results.jsonl").exists()


GOOD = {"run_id": "r", "check": "audit.gpu.inventory", "phase": "audit", "domain": "audit", "subject": "n1",
        "status": "fail", "severity": "critical", "summary": "7 GPU(s) visible where 8 Slurm declares"}


@pytest.mark.parametrize("bad", [
    {"check": "audit.gpu.inventory"},                              # most fields missing
    {**GOOD, "status": "pass!!"},                                  # an unknown status
    {**GOOD, "status": "pass", "severity": "none"},                # crafted to replace the real fail
])
def test_a_line_breaking_the_contract_is_reported_and_changes_no_verdict(tmp_path, capsys, bad):
    results.append(tmp_path, [GOOD])
    with open(tmp_path / results.RESULTS_FILE, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(bad) + "\n")
    loaded, warnings = results.load(tmp_path)
    assert [r["status"] for r in loaded] == ["fail"]
    assert len(warnings) == 1 and "breaks the result contract" in warnings[0] and ":2:" in warnings[0]
    assert cli.main(["report", str(tmp_path)]) == cli.GATE_FAILED  # the real fail stands, and gates the exit
    out = capsys.readouterr()
    assert "breaks the result contract" in out.err and "1 fail" in out.out
    assert "breaks the result contract" in (tmp_path / "report.md").read_text()


def _report_of(tmp_path, statuses):
    for i, status in enumerate(statuses):
        results.append(tmp_path, [{**GOOD, "subject": f"n{i}", "status": status, "severity": "minor"}])
    return str(tmp_path)


@pytest.mark.parametrize(("statuses", "args", "rc", "said"), [
    (["pass", "fail"], [], 3, "exit 3: 1 check result failed (--fail-on fail)"),
    (["pass", "fail"], ["--fail-on", "never"], 0, None),
    (["pass", "warn"], [], 0, None),
    (["pass", "warn"], ["--fail-on", "warn"], 3, "exit 3: 1 warned (--fail-on warn)"),
    (["pass", "skip"], [], 0, None),  # a skip is no finding
    # one category measured: the honest tier is at most Bronze, below a pipeline's minimum of Gold
    (["pass", "pass"], ["--min-tier", "Gold"], 3, "tier Bronze is below the minimum Gold"),
    (["pass", "pass"], ["--min-tier", "Bronze"], 0, None),
    (["pass"], ["--min-tier", "Shiny"], 2, "--min-tier 'Shiny' is not a tier of the rubric"),
])
def test_report_gates_its_exit_status_for_pipelines(tmp_path, capsys, statuses, args, rc, said):
    assert cli.main(["report", _report_of(tmp_path, statuses), *args]) == rc
    err = capsys.readouterr().err
    assert (said in err) if said else ("exit 3" not in err), err


def test_a_results_file_that_is_a_directory_is_a_message(tmp_path, capsys):
    (tmp_path / results.RESULTS_FILE).mkdir()
    assert cli.main(["report", str(tmp_path)]) == 2
    assert "is not a file" in capsys.readouterr().err
    loaded, warnings = results.load(tmp_path)
    assert loaded == [] and "is not a file (a directory)" in warnings[0]


def test_a_missing_extra_vars_file_is_a_message(tmp_path, capsys):
    with pytest.raises(SystemExit, match=r"-e @.*nowhere.yml: no such file"):
        cli.main(["evaluate", "-i", str(tmp_path), "-e", f"@{tmp_path / 'nowhere.yml'}"])


def test_an_extra_vars_file_goes_to_ansible_as_it_is_vault_values_and_all(tmp_path):
    vaulted = tmp_path / "secrets.yml"
    vaulted.write_text("clustereval_token: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  6162\nplain: 1\n")
    pairs, files = cli._extravars(["a=1", f"@{vaulted}"])
    assert pairs == {"a": "1"} and files == [str(vaulted.resolve())]  # not decrypted, not even read here
    assert cli._file_keys(str(vaulted)) == {"clustereval_token", "plain"}
    assert cli._file_keys(str(tmp_path / "none.yml")) == set()


def test_an_unexpected_error_is_one_sentence_and_a_non_zero_exit(monkeypatch, capsys):
    def broken(args):
        raise RuntimeError("the catalogue vanished")

    monkeypatch.delenv("CLUSTEREVAL_DEBUG", raising=False)
    monkeypatch.setattr(cli, "cmd_checks", broken)
    assert cli.main(["checks"]) == 1
    err = capsys.readouterr().err
    assert "checks failed: RuntimeError: the catalogue vanished" in err and "Traceback" not in err
    monkeypatch.setenv("CLUSTEREVAL_DEBUG", "1")
    with pytest.raises(RuntimeError):
        cli.main(["checks"])
