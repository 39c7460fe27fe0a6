"""Action ``clustereval.gpu.judge``: keep raw probe output as artifacts and turn it into check results.

Runs on the controller (no connection to the node). The results it returns under
``clustereval_results_json`` (one JSON string) are appended to ``results.jsonl`` by the
``clustereval.gpu.results`` callback.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible_collections.clustereval.gpu.plugins.module_utils import probe_runner

from clustereval import checks
from clustereval.checks import catalogue
from clustereval.results import CLUSTER_SUBJECT, TASK_RESULT_KEY, to_task_result

# Sent to each node as `python -c`: one file serves the collect module and this action.
with open(probe_runner.__file__, encoding="utf-8") as _runner:
    RUNNER_SOURCE = _runner.read()

DOCUMENTATION = r"""
---
module: judge
short_description: Judge collected probe output into clustereval check results
description:
  - Writes every probe's raw output to C(<run dir>/raw/<subject>/<artifact>) (plus a C(.meta.json)
    with the command, exit status, stderr and duration), then evaluates each selected check with
    C(clustereval.checks) and returns the results for the results callback to record.
  - Checks are selected with the play's tags; a tag selects a check when it equals the check id,
    is a dotted prefix of it (C(audit.slurm)), or names its phase. C(--skip-tags) works the same way.
options:
  checks:
    description: Check ids this task may evaluate (all must be in the check catalogue).
    type: list
    elements: str
  select:
    description: Instead of C(checks), every catalogue check of C(phase) and C(scope) (node or cluster).
    type: dict
  probes:
    description: The C(probes) returned by C(clustereval.gpu.collect) for this host.
    type: dict
  collect:
    description:
      - Probe definitions to run on the host first, in the same task (one worker and one SSH exchange
        per host): the probe runner the C(clustereval.gpu.collect) module uses, run with the node's
        Python directly (no module wrapper to unpack and compile); the task's C(environment) applies.
        An unreachable host is reported as unreachable, like any module task.
    type: list
    elements: dict
  fleet_hosts:
    description: For cluster-wide checks, the hosts whose C(clustereval_facts) are compared.
    type: list
    elements: str
  options:
    description: Check settings (expected GPU count, baseline class and overrides, scratch dir).
    type: dict
author: clustereval developers
"""

SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = dict(self._task.args)
        if args.get("collect") is not None:
            collected = self._collect(list(args["collect"]), task_vars)
            if collected.get("unreachable") or collected.get("failed"):
                return collected
            args["probes"] = collected.get("probes") or {}
            args["options"] = {**(args.get("options") or {}), "collect_duration_s": collected.get("duration_s")}
        select = args.get("select")
        if select:
            check_ids = catalogue.select(str(select.get("phase")), str(select.get("scope", "node")),
                                         select.get("domain"))
        else:
            check_ids = list(args.get("checks") or [])
        unknown = [c for c in check_ids if c not in catalogue.load()]
        if unknown:
            raise AnsibleActionFail(f"checks not in the catalogue: {', '.join(unknown)}")
        local = task_vars.get("hostvars", {}).get("localhost", {})
        run_dir = task_vars.get("clustereval_run_dir") or local.get("clustereval_run_dir")
        run_id = task_vars.get("clustereval_run_id") or local.get("clustereval_run_id") or "unknown"
        if not run_dir:
            raise AnsibleActionFail("clustereval_run_dir is not set: run clustereval.gpu.run_start first "
                                    "(playbooks/evaluate.yml does) or set it as a variable")
        fleet_hosts = args.get("fleet_hosts")
        subject = CLUSTER_SUBJECT if fleet_hosts is not None else task_vars["inventory_hostname"]
        probes = self._keep_artifacts(run_dir, subject, dict(args.get("probes") or {}))
        fleet = {}
        if fleet_hosts is not None:
            # Each hostvars lookup templates all of that host's variables: once per host.
            hostvars = task_vars.get("hostvars", {})
            fleet = {h: (hostvars[h].get("clustereval_facts") if h in hostvars else None) for h in fleet_hosts}
        options = dict(args.get("options") or {})
        if fleet_hosts is None:
            options["harness"] = checks.detect_harness(options.get("harness"), probes)
        else:
            harnesses = {(known or {}).get("harness") for known in fleet.values()}
            harnesses.discard(None)
            options["harness"] = checks.detect_harness(options.get("harness"), {},
                                                       fleet=sorted(harnesses))
        ctx_args = {"subject": subject, "probes": probes, "fleet": fleet}
        run_tags = list(task_vars.get("ansible_run_tags") or ["all"])
        skip_tags = list(task_vars.get("ansible_skip_tags") or [])
        results = []
        parse_cache: dict[str, Any] = {}
        for check_id in check_ids:
            if not checks.selected(check_id, run_tags, skip_tags):
                continue
            ctx = checks.Context(options=dict(options), parse_cache=parse_cache, **ctx_args)
            results.append(checks.evaluate(check_id, ctx, run_id))
        facts = {}
        if fleet_hosts is None and probes:
            facts = {"clustereval_facts": {**(task_vars.get("clustereval_facts") or {}),
                                           **checks.host_facts(checks.Context(subject=subject, probes=probes,
                                                                                  parse_cache=parse_cache)),
                                           "harness": options["harness"]}}
        counts: dict[str, int] = {}
        for item in results:
            counts[item["status"]] = counts.get(item["status"], 0) + 1
        result.update(changed=False, clustereval_run_dir=run_dir,
                      **{TASK_RESULT_KEY: to_task_result(results)},
                      ansible_facts=facts,
                      msg=", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no check selected")
        return result

    def _collect(self, probes: list[dict[str, Any]], task_vars: dict[str, Any]) -> dict[str, Any]:
        """Run the probes on the host in one exchange: the probe runner's source as ``python -c`` with the
        request on stdin (the task's ``environment`` and become apply). A lost connection raises, so the
        host is reported unreachable like any module task."""
        wrong = probe_runner.problems(probes)
        if wrong:
            raise AnsibleActionFail("; ".join(wrong))
        python = self._node_python(task_vars)
        cmd = f"{self._compute_environment_string()} {python} -c {shlex.quote(RUNNER_SOURCE)}".strip()
        request = json.dumps({"probes": probes, "parallel": probe_runner.DEFAULT_PARALLEL,
                              "max_output_bytes": probe_runner.DEFAULT_MAX_OUTPUT_BYTES})
        out = self._low_level_execute_command(cmd, in_data=request)
        try:
            answer = json.loads(out.get("stdout") or "")
        except ValueError:
            answer = None
        if out.get("rc") != 0 or not isinstance(answer, dict) or not isinstance(answer.get("probes"), dict):
            detail = (out.get("stderr") or out.get("stdout") or "no output").strip()[-1500:]
            if isinstance(answer, dict) and answer.get("msg"):
                detail = answer["msg"]
            return {"failed": True, "rc": out.get("rc"),
                    "msg": f"the probe runner failed on the node (exit status {out.get('rc')}): {detail}"}
        return answer

    def _node_python(self, task_vars: dict[str, Any]) -> str:
        """The node's Python: ansible_python_interpreter when set (not auto), the interpreter Ansible
        discovered, else the first python3 the node's shell finds."""
        configured = self._templar.template(task_vars.get("ansible_python_interpreter") or "")
        if configured and not str(configured).startswith("auto"):
            return shlex.quote(str(configured))
        discovered = (task_vars.get("ansible_facts") or {}).get("discovered_interpreter_python")
        if discovered:
            return shlex.quote(str(discovered))
        return "$(command -v python3 || echo /usr/libexec/platform-python)"

    @staticmethod
    def _keep_artifacts(run_dir: str, subject: str, probes: dict[str, Any]) -> dict[str, Any]:
        """Write each probe's stdout under raw/<subject>/ and point the probe at it."""
        host_dir = os.path.join(run_dir, "raw", SAFE_NAME.sub("_", subject))
        if probes:
            os.makedirs(host_dir, exist_ok=True)
        kept = {}
        for name, probe in probes.items():
            probe = dict(probe)
            filename = SAFE_NAME.sub("_", str(probe.get("artifact") or f"{name}.txt"))
            path = os.path.join(host_dir, filename)
            with open(path, "w", encoding="utf-8", errors="replace") as fh:
                fh.write(probe.get("stdout") or "")
            meta = {k: probe.get(k) for k in ("name", "cmd", "rc", "stderr", "duration_s", "timed_out",
                                               "missing", "truncated", "timeout", "parser")}
            with open(path + ".meta.json", "w", encoding="utf-8") as fh:
                json.dump(meta, fh, indent=2, sort_keys=True)
            probe["artifact"] = os.path.relpath(path, run_dir)
            kept[name] = probe
        return kept
