"""What the unit tests of the checks share: probe records as the collect module returns them, and one call
that judges a check and holds its result to the result contract."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType
from typing import Any

from clustereval import checks
from clustereval.checks import Context, probe_catalogue
from clustereval.results import problems

RUN = "test-run"
REPO = Path(__file__).resolve().parents[1]


def load_plugin(relative: str, name: str) -> ModuleType:
    """A plugin of the collection (``plugins/filter/engine.py``) loaded from its file, with Ansible's collection
    loader installed first as ansible-playbook has it, so the plugin's ``ansible_collections.clustereval.gpu``
    imports resolve to this checkout."""
    from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder

    _AnsibleCollectionFinder(paths=[str(REPO / "collections")])._install()
    spec = importlib.util.spec_from_file_location(name, REPO / relative)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

# Words with which a summary states a problem. A check whose summary says one of these about the cluster
# must not pass (issue V); every unit test of a check holds its pass verdicts to that.
PROBLEM_WORDS = re.compile(r"\b(missing|not installed|not found|unavailable|cannot|can't|broken|"
                           r"no \w+ on the (?:login|batch) PATH|is absent|are absent|fell off|vulnerable)\b",
                           re.IGNORECASE)


def probe(name: str, stdout: str = "", rc: int = 0, **fields: Any) -> dict[str, dict[str, Any]]:
    """``{name: record}`` as ``clustereval.gpu.collect`` returns one probe. ``cmd`` defaults to the name and
    ``parser`` to the probe catalogue's, so a check reads the record through the parser a real run uses;
    ``fields`` override anything (``missing=True``, ``tool=...``, ``stderr=...``, ``timed_out=True``)."""
    record: dict[str, Any] = {"name": name, "cmd": name, "rc": rc, "stdout": stdout, "stderr": "",
                              "artifact": f"raw/n1/{name}.txt"}
    parser = (probe_catalogue.load().get(name) or {}).get("parser")
    if parser:
        record["parser"] = parser
    record.update(fields)
    return {name: record}


def judge(check_id: str, probes: dict[str, dict[str, Any]] | None = None, *, fleet: dict[str, Any] | None = None,
          subject: str = "n1", **options: Any) -> dict[str, Any]:
    """The result of ``check_id`` judged on ``probes`` (a node) or ``fleet`` (a cluster-scope check), after
    asserting it honours the result contract."""
    ctx = Context(subject=subject, probes=probes or {}, fleet=fleet or {}, options=options)
    return held_to_contract(check_id, checks.evaluate(check_id, ctx, RUN))


def judge_many(check_id: str, ctx: Context) -> list[dict[str, Any]]:
    """Every result of ``check_id`` judged in ``ctx`` (a check that gives one verdict per tier, pair or
    operation), each held to the result contract."""
    return [held_to_contract(check_id, result) for result in checks.evaluate_many(check_id, ctx, RUN)]


def held_to_contract(check_id: str, result: dict[str, Any]) -> dict[str, Any]:
    """``result`` after asserting it honours the result contract and, when it passes, states no problem."""
    assert problems(result) == [], result
    if result["status"] == "pass":
        stated = PROBLEM_WORDS.search(result["summary"])
        assert stated is None, f"{check_id} passes while its summary states a problem ({stated.group(0)!r}): " \
                               f"{result['summary']}"
    return result
