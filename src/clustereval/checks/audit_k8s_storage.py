"""Kubernetes audit checks: a default StorageClass, and a shared file system that provisions ReadWriteMany
volumes, from the API objects and an acting provisioning test (a 1Gi claim, always deleted)."""

from __future__ import annotations

import re
from typing import Any

from clustereval.checks import Context, HarnessError, ProbeFailed, Verdict
from clustereval.checks.audit_k8s import (
    DEFAULT_CLASS,
    UNREACHABLE,
    k8s_baseline,
    k8s_check,
    list_items,
)
from clustereval.parsers.probe_k8s import pvc_test
from clustereval.results import worst


@k8s_check("audit.k8s.default_storage_class")
def default_storage_class(ctx: Context) -> Verdict:
    items = list_items(ctx, "k8s_storage")
    if items is None:
        raise HarnessError("`kubectl get storageclasses` says the API serves no storage classes")
    classes = [i for i in items if i["kind"] == "StorageClass"]
    defaults = [c for c in classes if any(c["annotations"].get(k) == "true" for k in DEFAULT_CLASS)]
    evidence = {"storage_classes": {c["name"]: _raw_field(c, "provisioner") for c in classes},
                "defaults": [c["name"] for c in defaults]}
    pending = [f"{p['namespace']}/{p['name']}" for p in items if p["kind"] == "PersistentVolumeClaim"
               and not _is_test_pvc(p)
               and not (p.get("spec") or {}).get("storageClassName") and (p.get("status") or {}).get("phase")
               == "Pending"]
    evidence["pending_pvcs_without_class"] = pending
    if not classes:
        return Verdict("fail", "no StorageClass at all: PVCs cannot be provisioned", 0, evidence=evidence)
    if not defaults:
        return Verdict("fail", f"{len(classes)} StorageClass(es) ({', '.join(c['name'] for c in classes)}) but none "
                               "is the default: PVCs without storageClassName stay Pending"
                       + (f" ({len(pending)} are)" if pending else ""), 0, evidence=evidence)
    if len(defaults) > 1:
        return Verdict("warn", f"{len(defaults)} default StorageClasses ({', '.join(c['name'] for c in defaults)}): "
                               "which one a PVC gets depends on the API server version", len(defaults),
                       evidence=evidence)
    cls = defaults[0]
    provisioner = _raw_field(cls, "provisioner")
    if provisioner == "kubernetes.io/no-provisioner":
        return Verdict("warn", f"default StorageClass {cls['name']} has no provisioner: every PV must be "
                               "created by hand", 1, evidence=evidence)
    return Verdict("pass", f"default StorageClass {cls['name']} ({provisioner})", 1, evidence=evidence)


def _raw_field(item: dict[str, Any], field: str) -> Any:
    """A top-level field of an object without spec (StorageClass ``provisioner``)."""
    return (item.get("fields") or {}).get(field)


# ---------------------------------------------------------------- the storage provisioning test (acts)

PVC_PROBE = "k8s_pvc_test"
TEST_PVC_LABELS = {"app.kubernetes.io/managed-by": "clustereval", "clustereval/test": "pvc-provisioning"}
TEST_PVC_SWEEP = ("kubectl delete pvc -l app.kubernetes.io/managed-by=clustereval,clustereval/test=pvc-provisioning"
                  " (in the audit's namespace)")
_PVC_FAILED = ("ProvisioningFailed", "FailedBinding", "ClaimLost")


def _is_test_pvc(item: dict[str, Any]) -> bool:
    """A claim of clustereval's own provisioning test (this run's, listed while it ran, or a leftover)."""
    labels = item.get("labels") or {}
    return all(labels.get(k) == v for k, v in TEST_PVC_LABELS.items())


def _one(facts: dict[str, list[str]], key: str) -> str:
    return (facts.get(key) or [""])[0]


def _pvc_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The claim's last eight events as evidence (messages on one line, cut to 400 characters)."""
    return [{**e, "message": " ".join(str(e.get("message") or "").split())[:400]} for e in events][-8:]


def provisioning_test(ctx: Context, known: list[str]) -> dict[str, Any]:
    """What the storage provisioning test (probe ``k8s_pvc_test``) found, as ``outcome`` plus evidence.

    ``outcome``: ``not_tried`` (actions disabled, no class to try, probe not collected), ``bound``,
    ``wait_for_consumer`` (a WaitForFirstConsumer class: never binds without a pod), ``failed``
    (ProvisioningFailed / FailedBinding event, or Lost), ``pending`` (not bound within the wait, no failure
    reported), ``refused`` (the API rejected the claim: RBAC, quota, admission). HarnessError when the test
    could not run or report (API unreachable, namespace missing, killed at its timeout, output cut short).
    """
    probe = ctx.probes.get(PVC_PROBE)
    if probe is None:
        return {"outcome": "not_tried", "why": "the provisioning test was not collected", "tried": False}
    # Read before the exit status is looked at: a test killed at its timeout still names its claim.
    read = pvc_test(str(probe.get("stdout") or ""))
    facts = read["values"]
    name = _one(facts, "name")
    leftover = (f": its test PVC {name} may remain until the next audit's sweep (10 minutes on) or "
                f"`{TEST_PVC_SWEEP}` removes it" if name and "delete_rc" not in facts else "")
    if probe.get("timed_out"):
        if PVC_PROBE not in ctx.used:
            ctx.used.append(PVC_PROBE)
        raise HarnessError(f"the storage provisioning test ran past its {probe.get('timeout')} s timeout and was "
                           f"killed{leftover}")
    try:
        ctx.probe(PVC_PROBE)
    except ProbeFailed as exc:
        raise HarnessError(f"the storage provisioning test script failed: {exc}") from None
    if "end" not in facts:
        raise HarnessError(f"the storage provisioning test's output is cut short (no final end=ok line){leftover}")
    if "skipped" in facts:
        why = _one(facts, "skipped")
        if "actions are switched off" in why:
            why = "actions disabled: clustereval_audit_allow_actions=false"
        return {"outcome": "not_tried", "why": why, "tried": False, "leftovers_deleted": _one(facts, "leftovers")}
    pvc = read["pvc"]
    meta, spec = (pvc or {}).get("metadata") or {}, (pvc or {}).get("spec") or {}
    annotations = meta.get("annotations") or {}
    provisioner = (_one(facts, "class_provisioner") or annotations.get("volume.kubernetes.io/storage-provisioner")
                   or annotations.get("volume.beta.kubernetes.io/storage-provisioner") or "")
    test: dict[str, Any] = {
        "tried": True, "name": name, "namespace": meta.get("namespace") or _one(facts, "namespace") or None,
        "class": spec.get("storageClassName") or _one(facts, "class") or None, "provisioner": provisioner or None,
        "class_chosen_as": _one(facts, "class_reason"), "binding_mode": _one(facts, "class_binding") or None,
        "reclaim_policy": _one(facts, "class_reclaim") or None,
        "shared_fs_provisioner": bool(provisioner) and any(provisioner.startswith(p) or p in provisioner
                                                             for p in known),
        "phase": _one(facts, "phase") or None, "waited_s": _int(_one(facts, "waited_s")),
        "wait_limit_s": _int(_one(facts, "wait_limit_s")),
        "access_modes": ((pvc or {}).get("status") or {}).get("accessModes") or spec.get("accessModes"),
        "capacity": (((pvc or {}).get("status") or {}).get("capacity") or {}).get("storage"),
        "volume": spec.get("volumeName"), "events": _pvc_events(read["events"]),
        "create_rc": _int(_one(facts, "create_rc")), "create": "; ".join(facts.get("create") or [])[:400],
        "delete_rc": _int(_one(facts, "delete_rc")), "delete": "; ".join(facts.get("delete") or [])[:400],
        "leftovers_deleted": _one(facts, "leftovers"),
    }
    if test["create_rc"] != 0:
        text = test["create"].lower()
        if any(marker in text for marker in UNREACHABLE):
            raise HarnessError(f"the provisioning test could not reach the Kubernetes API: {test['create'][:300]}")
        if "namespaces" in text and "not found" in text:
            raise HarnessError(f"the provisioning test's namespace does not exist (clustereval_audit_k8s_namespace): "
                               f"{test['create'][:300]}")
        return {**test, "outcome": "refused", "forbidden": "forbidden" in text,
                "why": test["create"] or f"kubectl create exited with status {test['create_rc']}"}
    if pvc is None:
        error = "; ".join(facts.get("get_err") or [])[:300] or "no PVC JSON in the output"
        if any(marker in error.lower() for marker in UNREACHABLE):
            raise HarnessError(f"the provisioning test lost the Kubernetes API: {error}")
        raise HarnessError(f"the provisioning test could not read its PVC {name} back: {error}")
    phase = ((pvc.get("status") or {}).get("phase")) or test["phase"]
    failures = [e for e in test["events"] if e["reason"] in _PVC_FAILED]
    if phase == "Bound":
        outcome = "bound"
    elif phase == "Lost" or failures:
        outcome = "failed"
    elif test["binding_mode"] == "WaitForFirstConsumer" or any(e["reason"] == "WaitForFirstConsumer"
                                                                for e in test["events"]):
        outcome = "wait_for_consumer"
    else:
        outcome = "pending"
    return {**test, "phase": phase, "outcome": outcome, "failure": failures[-1] if failures else None}


def _int(text: str) -> int | None:
    return int(text) if re.fullmatch(r"-?\d+", text or "") else None


def _test_words(test: dict[str, Any]) -> str:
    where = f"{test['class']} ({test['provisioner']})" if test.get("class") else (
        f"the default class ({test['provisioner']})" if test.get("provisioner") else "the default class")
    return f"test PVC {test['namespace'] + '/' if test.get('namespace') else ''}{test['name']} on {where}"


def _cleanup_words(test: dict[str, Any]) -> tuple[str, bool]:
    """How the test's own claim was cleaned up (a clause), and whether that went wrong."""
    if test.get("delete_rc") == 0:
        return "the test PVC was deleted", False
    ns = f"-n {test['namespace']} " if test.get("namespace") else ""
    return (f"the test PVC could NOT be deleted ({test.get('delete') or 'no answer'}): remove it with "
            f"`kubectl delete pvc {ns}{test['name']}`"), True


def _rwx_from_api(items: list[dict[str, Any]], known: list[str]) -> Verdict:
    """The verdict the API objects alone give (classes, CSI drivers, other tenants' RWX claims)."""
    classes = [i for i in items if i["kind"] == "StorageClass"]
    drivers = {i["name"] for i in items if i["kind"] == "CSIDriver"}
    rwx_classes = {c["name"]: _raw_field(c, "provisioner") for c in classes
                   if any(str(_raw_field(c, "provisioner") or "").startswith(p) or
                          p in str(_raw_field(c, "provisioner") or "") for p in known)}
    rwx_pvcs = [p for p in items if p["kind"] == "PersistentVolumeClaim" and not _is_test_pvc(p)
                and "ReadWriteMany" in ((p.get("spec") or {}).get("accessModes") or [])]
    bound = [f"{p['namespace']}/{p['name']}" for p in rwx_pvcs if (p.get("status") or {}).get("phase") == "Bound"]
    pending = [f"{p['namespace']}/{p['name']}" for p in rwx_pvcs if (p.get("status") or {}).get("phase") == "Pending"]
    missing_driver = {n: prov for n, prov in rwx_classes.items()
                      if drivers and "/" not in str(prov) and prov not in drivers}
    evidence = {"rwx_storage_classes": rwx_classes, "csi_drivers": sorted(drivers), "rwx_pvcs_bound": bound,
                "rwx_pvcs_pending": pending, "classes_without_csi_driver": missing_driver}
    if pending and not bound:
        return Verdict("fail", f"ReadWriteMany PVC(s) stuck Pending ({', '.join(pending[:5])}) and none bound: "
                               "no working RWX provisioner", evidence=evidence)
    if rwx_classes and len(missing_driver) == len(rwx_classes) and not bound:
        return Verdict("fail", f"RWX StorageClass(es) {', '.join(rwx_classes)} name CSI driver(s) "
                               f"{', '.join(sorted(set(map(str, missing_driver.values()))))} that are not installed",
                       evidence=evidence)
    if bound:
        return Verdict("pass", f"{len(bound)} ReadWriteMany PVC(s) bound (e.g. {bound[0]})"
                       + (f"; RWX classes: {', '.join(rwx_classes)}" if rwx_classes else ""),
                       evidence=evidence)
    if rwx_classes:
        return Verdict("pass", f"shared-file-system StorageClass(es): "
                               f"{', '.join(f'{n} ({p})' for n, p in rwx_classes.items())}",
                       evidence=evidence)
    return Verdict("warn", "no StorageClass with a shared-file-system provisioner and no bound ReadWriteMany PVC: "
                           "multi-node jobs cannot share a dataset or checkpoint volume",
                   evidence=evidence)


@k8s_check("audit.k8s.csi_rwx")
def csi_rwx(ctx: Context) -> Verdict:
    """API objects (shared-file-system class, CSI driver, bound RWX claims) AND the provisioning test (cmax 66).

    The test (probe ``k8s_pvc_test``, acting: it only runs while actions are allowed) creates a small
    ReadWriteMany claim and deletes it. Bound: pass. ProvisioningFailed on a shared-file-system class: fail;
    still Pending without a failure: warn; refused by the API: warn; WaitForFirstConsumer: pass on a
    shared-file-system class with the note that binding waits for a pod (provisioning not proven).
    Not tried (actions disabled): the API objects decide and the summary says provisioning was not tried.
    """
    items = list_items(ctx, "k8s_storage")
    if items is None:
        raise HarnessError("`kubectl get storageclasses` says the API serves no storage classes")
    known = k8s_baseline()["rwx_provisioners"]
    base = _rwx_from_api(items, known)
    test = provisioning_test(ctx, known)
    evidence = {**base.evidence, "provisioning_test": test}
    outcome = test["outcome"]
    if outcome == "not_tried":
        return Verdict(base.status, f"{base.summary}; provisioning not tried ({test['why']})", evidence=evidence)
    shared = test["shared_fs_provisioner"]
    if outcome == "refused":
        what = ("the evaluation account may not create PersistentVolumeClaims, so provisioning could not be tried"
                if test.get("forbidden") else "the API refused the test PVC, so provisioning could not be tried")
        return Verdict(worst(base.status, "warn"), f"{what}: {test['why'][:300]}; {base.summary}",
                       evidence=evidence)
    cleanup, cleanup_failed = _cleanup_words(test)
    subject = _test_words(test)
    if outcome == "bound":
        notes = []
        if not shared:
            notes.append("its provisioner is not on the known shared-file-system list, but it served ReadWriteMany")
        if test.get("reclaim_policy") == "Retain" and test.get("volume"):
            notes.append(f"the class keeps volumes (reclaimPolicy Retain): PersistentVolume {test['volume']} stays "
                         "Released until an administrator deletes it")
        pending = base.evidence.get("rwx_pvcs_pending") or []
        if pending:
            notes.append(f"{len(pending)} other ReadWriteMany PVC(s) are Pending: {', '.join(pending[:5])}")
        status = "warn" if (pending or cleanup_failed) else "pass"
        done = "and deleted" if not cleanup_failed else f"but {cleanup.removeprefix('the test PVC ')}"
        return Verdict(status, f"{subject} (ReadWriteMany, {test.get('capacity') or 'requested size'}) bound in "
                               f"{test['waited_s']} s {done}" + "".join(f"; {n}" for n in notes),
                       evidence=evidence)
    if outcome == "wait_for_consumer":
        note = ("binds only when a pod uses it (WaitForFirstConsumer): the claim was accepted and stayed Pending, "
                "so provisioning itself was not proven")
        if shared:
            return Verdict(worst(base.status, "warn" if cleanup_failed else "pass"),
                           f"{subject} {note}; {cleanup}; {base.summary}", evidence=evidence)
        return Verdict(worst(base.status, "warn"), f"{base.summary}; {subject} {note}, nor that this class serves "
                                                    f"ReadWriteMany; {cleanup}", evidence=evidence)
    if outcome == "failed":
        failure = test.get("failure") or {}
        why = (f"{failure.get('reason')}: {failure.get('message')}" if failure
               else f"the claim went {test['phase']}")
        if shared:
            return Verdict("fail", f"{subject} did not bind: {why[:400]}; {cleanup}", evidence=evidence)
        return Verdict(worst(base.status, "warn"), f"{base.summary}; the default class could not provision a "
                                                    f"ReadWriteMany volume either: {subject}: {why[:400]}; "
                                                    f"{cleanup}", evidence=evidence)
    last = test["events"][-1] if test["events"] else None
    waited = f"{test['waited_s']} s" if test.get("waited_s") is not None else "the wait"
    return Verdict(worst(base.status, "warn"),
                   f"{subject} was still Pending after {waited}"
                   + (f" (last event {last['reason']}: {last['message'][:300]})" if last else " (no event recorded)")
                   + f"; {cleanup}; {base.summary}", evidence=evidence)

