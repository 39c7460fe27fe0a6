"""Action ``clustereval.gpu.judge``: keep raw probe output as artifacts and turn it into check results.

Runs on the controller (no connection to the node). The results it returns under
``clustereval_results_json`` (one JSON string) are appended to ``results.jsonl`` by the
``clustereval.gpu.results`` callback.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible_collections.clustereval.gpu.plugins.module_utils import probe_runner
from ansible_collections.clustereval.gpu.plugins.plugin_utils import bundled  # noqa: F401  (before clustereval)

from clustereval import checks, remote, rundir, series
from clustereval import facts as facts_mod
from clustereval.checks import catalogue, probe_catalogue
from clustereval.results import CLUSTER_SUBJECT, TASK_RESULT_KEY, to_task_result

# Sent to each node as `python -c`: one file serves the collect module and this action.
with open(probe_runner.__file__, encoding="utf-8") as _runner:
    RUNNER_SOURCE = _runner.read()


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = dict(self._task.args)
        try:
            run_dir, run_id = rundir.locate(task_vars)
        except rundir.RunDirMissing as exc:
            raise AnsibleActionFail(str(exc)) from None
        collect_only = args.get("collect_for") is not None
        check_ids = self._check_ids({"checks": args["collect_for"]} if collect_only else args)
        options = dict(args.get("options") or {})
        fleet_hosts = args.get("fleet_hosts")
        subject = CLUSTER_SUBJECT if fleet_hosts is not None else task_vars["inventory_hostname"]
        chosen = checks.selection(check_ids, list(task_vars.get("ansible_run_tags") or ["all"]),
                                  list(task_vars.get("ansible_skip_tags") or []))
        resume = task_vars.get("clustereval_resume") or {}
        if resume and fleet_hosts is None and not collect_only:
            # Resuming: a node runs again only the checks it has no result for (or only errors).
            chosen = [c for c in chosen if c in ((resume.get("only") or {}).get(subject) or [])]
        if resume:
            # ... and cluster-wide checks, and a node's comparison with its siblings, are judged over the fleet.
            if fleet_hosts is not None:
                fleet_hosts = list(dict.fromkeys([*fleet_hosts, *(resume.get("fleet") or [])]))
            if args.get("siblings") is not None:
                args["siblings"] = list(dict.fromkeys([*args["siblings"], *(resume.get("fleet") or [])]))
        refused = {c: why for c in chosen if (why := checks.not_permitted(c, options, subject))}
        runnable = [c for c in chosen if c not in refused]
        # A selection judges either the node checks that compare the node with its siblings (with_fleet) or
        # the others; the probes collected are still every selected check's.
        with_fleet = bool((args.get("select") or {}).get("with_fleet"))
        judged = [c for c in chosen if not args.get("select")
                  or bool(catalogue.entry(c).get("judged_with_fleet")) == with_fleet]
        probes = dict(args.get("probes") or {})
        if args.get("collect") is not None:
            select = args.get("select") or {}
            # The facts functions' probes feed the cluster-wide comparisons: needed only when one is selected.
            fleet_checks = catalogue.select(str(select.get("phase")), "cluster") if select else []
            wanted = checks.probes_for(runnable, fleet_facts=bool(checks.selection(
                fleet_checks, list(task_vars.get("ansible_run_tags") or ["all"]),
                list(task_vars.get("ansible_skip_tags") or []))) if select else True)
            # An instance of a catalogue probe (one per peer of a mesh) names its catalogue probe in `probe`.
            plan = [p for p in args["collect"] if wanted is None or p.get("probe", p.get("name")) in wanted]
            collected = self._collect(probe_catalogue.with_params(plan, args.get("params")), task_vars)
            if collected.get("unreachable") or collected.get("failed"):
                return collected
            probes = collected.get("probes") or {}
            options["collect_duration_s"] = collected.get("duration_s")
        siblings = args.get("siblings")
        if siblings is not None and fleet_hosts is None:
            # Judged once every node was collected: read back what this node kept, compare with the others' facts.
            wanted_probes = sorted({p for c in judged if c in runnable for p in catalogue.entry(c).get("probes") or []})
            probes = rundir.kept_probes(run_dir, subject, wanted_probes) if wanted_probes else {}
        else:
            probes = rundir.keep_probe_outputs(run_dir, subject, probes)
        fleet, per_host = {}, {}
        if siblings is not None and fleet_hosts is None:
            fleet = {h: self._facts_of(h, task_vars, run_dir, options, resume) for h in siblings if h != subject}
        if fleet_hosts is not None:
            fleet = {h: self._facts_of(h, task_vars, run_dir, options, resume) for h in fleet_hosts}
            harnesses = sorted({(known or {}).get("harness") for known in fleet.values()} - {None})
            options["harness"] = checks.detect_harness(options.get("harness"), {}, fleet=harnesses)
            per_host = facts_mod.load(run_dir)
        else:
            options["harness"] = checks.detect_harness(options.get("harness"), probes)
        parse_cache: dict[str, Any] = {}
        new_facts = {}
        if fleet_hosts is None and siblings is None and set(probes) & checks.fact_probes():
            merged = {**(task_vars.get("clustereval_facts") or {}),
                      **checks.host_facts(checks.Context(subject=subject, probes=probes, parse_cache=parse_cache)),
                      "harness": options["harness"]}
            new_facts = {"clustereval_facts": merged}
            per_host = {subject: facts_mod.hardware(merged)}
            facts_mod.write(run_dir, subject, per_host[subject])
        elif fleet_hosts is None:
            per_host = {subject: facts_mod.hardware(task_vars.get("clustereval_facts") or {})}
        subject_facts = facts_mod.for_subject(per_host, subject)
        host_probes = {}
        if fleet_hosts is not None and args.get("load_probes"):
            host_probes = {h: rundir.kept_probes(run_dir, h, list(args["load_probes"])) for h in fleet_hosts}
        items = []
        for check_id in [] if collect_only else judged:
            if check_id in refused and not collect_only:
                verdict = checks.Verdict("skip", refused[check_id], evidence={"not_permitted": True})
                items.append(checks.make_result(check_id, subject, verdict, run_id=run_id, artifacts=[],
                                                started=checks.now_iso(), duration_s=0.0,
                                                params=args.get("variant")))
                continue
            ctx = checks.Context(subject=subject, probes=probes, fleet=fleet, options=dict(options),
                                 parse_cache=parse_cache, params=dict(args.get("variant") or {}),
                                 facts=subject_facts, host_facts=per_host, host_probes=host_probes)
            items.extend(checks.evaluate_many(check_id, ctx, run_id))
        series.write_pending(run_dir, items)
        rundir.record(run_dir, items)
        counts: dict[str, int] = {}
        for item in items:
            counts[item["status"]] = counts.get(item["status"], 0) + 1
        result.update(changed=False, clustereval_run_dir=run_dir,
                      **{TASK_RESULT_KEY: to_task_result(items), rundir.RECORDED_KEY: True},
                      ansible_facts=new_facts,
                      msg=", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no check selected")
        return result

    @staticmethod
    def _facts_of(host: str, task_vars: dict[str, Any], run_dir: str, options: dict[str, Any],
                  resume: dict[str, Any]) -> dict[str, Any] | None:
        """A host's facts: what this run's task derived; when resuming, for a host this pass does not reach
        again, what its probes kept in the run directory say."""
        hostvars = task_vars.get("hostvars", {})
        known = None
        if host in hostvars:
            # The facts are data this run's judge set, never a template: read them untemplated (templating a
            # sibling's whole facts dict, for every node, made the fleet comparison quadratic in real cost).
            raw = hostvars.raw_get(host) if hasattr(hostvars, "raw_get") else hostvars[host]
            known = raw.get("clustereval_facts") if isinstance(raw, Mapping) else None
        if known is not None or not resume:
            return known
        kept = rundir.kept_probes(run_dir, host, sorted(checks.fact_probes()))
        if not kept:
            return None
        ctx = checks.Context(subject=host, probes=kept, parse_cache={})
        return {**checks.host_facts(ctx), "harness": checks.detect_harness(options.get("harness"), kept)}

    @staticmethod
    def _check_ids(args: dict[str, Any]) -> list[str]:
        select = args.get("select")
        if select:
            check_ids = catalogue.select(str(select.get("phase")), str(select.get("scope", "node")),
                                         select.get("domain"))
        else:
            check_ids = list(args.get("checks") or [])
        unknown = [c for c in check_ids if c not in catalogue.load()]
        if unknown:
            raise AnsibleActionFail(f"checks not in the catalogue: {', '.join(unknown)}")
        return check_ids

    def _collect(self, probes: list[dict[str, Any]], task_vars: dict[str, Any]) -> dict[str, Any]:
        """Run the probes on the host in one exchange (the probe runner's source as ``python -c``). A lost
        connection raises, so the host is reported unreachable like any module task."""
        wrong = probe_runner.problems(probes)
        if wrong:
            raise AnsibleActionFail("; ".join(wrong))
        request = {"probes": probes, "parallel": probe_runner.DEFAULT_PARALLEL,
                   "max_output_bytes": probe_runner.DEFAULT_MAX_OUTPUT_BYTES}
        try:
            answer = remote.run_script(self, task_vars, RUNNER_SOURCE, request)
        except remote.RemoteFailed as exc:
            return {"failed": True, "rc": exc.rc, "msg": f"the probe runner failed on the node ({exc})"}
        if answer.get("failed") or not isinstance(answer.get("probes"), dict):
            return {"failed": True, "msg": f"the probe runner failed on the node: {answer.get('msg') or answer}"}
        return answer
