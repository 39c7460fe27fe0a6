"""The simulated Kubernetes API's profile keys under ``k8s:`` (``sim/overlays/k8s.py``): which exist, and what
their values must look like; a profile naming an unknown key or a malformed value is refused, naming it
(:class:`~clustereval.sim.profile.ProfileError`, which ``clustereval sim up`` prints as its error)."""

from __future__ import annotations

import re
from typing import Any

from clustereval.sim.keys import known_mapping
from clustereval.sim.profile import ProfileError

ADMISSION_PLUGINS = ("ExtendedResourceToleration",)
# every key a profile may set under k8s: (cluster level, or per node under nodes:)
SETTINGS = {"enabled", "node_monitor_grace_s", "block", "cpus", "user", "lb_address", "cpu_manager_policy", "taints",
            "daemonset_tolerations", "namespaces", "network_policies", "admission_plugins",
            # finalizers added to every created pod, never cleared: a stuck delete (docs/sim.md)
            "pod_finalizers",
            # seconds the scheduler, kubelet and volume provisioner take (LATENCY_KEYS; docs/sim.md)
            "latency",
            # AMD nodes: the ROCm device plugin's resource_naming_strategy (single: amd.com/gpu; mixed:
            # amd.com/<compute>_<memory>, e.g. amd.com/cpx_nps4)
            "amd_resource_naming"}
AMD_RESOURCE_NAMING = ("single", "mixed")
# k8s.latency keys: the scheduler binding a pod, the kubelet starting its container after that, the provisioner
# creating a claim's volume, and deleting it after the claim is gone (shims/k8s_volumes.py knows the same keys)
LATENCY_KEYS = ("pod_schedule_s", "pod_start_s", "pvc_provision_s", "pv_delete_s")
TAINT = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_./]*)(?:=([-A-Za-z0-9_.]*))?:(NoSchedule|PreferNoSchedule|NoExecute)$")
TOLERATION_KEYS = {"key", "operator", "value", "effect", "tolerationSeconds"}
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
POLICY_SPEC_KEYS = {"podSelector", "policyTypes", "ingress", "egress"}


def check_settings(k8s: dict[str, Any], daemonsets: tuple[str, ...] | dict[str, Any]) -> None:
    """Refuse unknown or malformed ``k8s:`` keys with a message naming the key (ProfileError); ``daemonsets``:
    the names of the DaemonSets whose tolerations a profile may set."""
    known_mapping("k8s", k8s, SETTINGS, error=ProfileError)
    node_taints(k8s)
    finalizers = k8s.get("pod_finalizers") or []
    if not isinstance(finalizers, list) or not all(isinstance(f, str) and "/" in f for f in finalizers):
        raise ProfileError("k8s.pod_finalizers must be a list of domain-qualified names (example.com/name)")
    for key in ("daemonset_tolerations", "namespaces", "network_policies"):
        if not isinstance(k8s.get(key) or {}, dict):
            raise ProfileError(f"k8s.{key} must be a mapping")
    for name, tolerations in (k8s.get("daemonset_tolerations") or {}).items():
        if name not in daemonsets:
            raise ProfileError(f"k8s.daemonset_tolerations.{name}: no such DaemonSet; known: "
                             f"{sorted(daemonsets)}")
        _check_tolerations(f"k8s.daemonset_tolerations.{name}", tolerations)
    for name, labels in (k8s.get("namespaces") or {}).items():
        if not isinstance(labels or {}, dict) or not all(isinstance(v, str) for v in (labels or {}).values()):
            raise ProfileError(f"k8s.namespaces.{name} must be a mapping of label -> string value (or empty)")
    for namespace, policies in (k8s.get("network_policies") or {}).items():
        where = f"k8s.network_policies.{namespace}"
        if not isinstance(policies or [], list):
            raise ProfileError(f"{where} must be a list of {{name, spec}} NetworkPolicies (or empty)")
        names = [_check_policy(f"{where}[{i}]", p) for i, p in enumerate(policies or [])]
        if len(set(names)) != len(names):
            raise ProfileError(f"{where}: two NetworkPolicies have the same name")
    pod_and_volume_latency(k8s)
    if str(k8s.get("amd_resource_naming", "single")) not in AMD_RESOURCE_NAMING:
        raise ProfileError(f"k8s.amd_resource_naming must be one of {list(AMD_RESOURCE_NAMING)}")
    plugins = k8s.get("admission_plugins") or []
    if not isinstance(plugins, list) or set(plugins) - set(ADMISSION_PLUGINS):
        raise ProfileError(f"k8s.admission_plugins must be a list of {list(ADMISSION_PLUGINS)}")


def _check_tolerations(where: str, tolerations: Any) -> None:
    if not isinstance(tolerations or [], list):
        raise ProfileError(f"{where} must be a list of tolerations")
    for i, tol in enumerate(tolerations or []):
        at = f"{where}[{i}]"
        if not isinstance(tol, dict) or set(tol) - TOLERATION_KEYS:
            raise ProfileError(f"{at} must be a toleration with keys from {sorted(TOLERATION_KEYS)}")
        operator = tol.get("operator", "Equal")
        if operator not in ("Equal", "Exists"):
            raise ProfileError(f"{at}.operator must be Equal or Exists")
        if tol.get("effect", "") not in ("", *TAINT_EFFECTS):
            raise ProfileError(f"{at}.effect must be one of {list(TAINT_EFFECTS)} (or empty: every effect)")
        if operator == "Exists" and tol.get("value"):
            raise ProfileError(f"{at}.value must be empty when operator is Exists")
        if not tol.get("key") and operator != "Exists":
            raise ProfileError(f"{at}.operator must be Exists when key is empty")


def _check_policy(where: str, policy: Any) -> str:
    if not isinstance(policy, dict) or set(policy) - {"name", "spec"} or not isinstance(policy.get("name"), str):
        raise ProfileError(f"{where} must be a mapping with a name and a spec")
    spec = policy.get("spec") or {}
    if not isinstance(spec, dict) or set(spec) - POLICY_SPEC_KEYS:
        raise ProfileError(f"{where}.spec may only have the keys {sorted(POLICY_SPEC_KEYS)}")
    if set(spec.get("policyTypes") or []) - {"Ingress", "Egress"}:
        raise ProfileError(f"{where}.spec.policyTypes must list Ingress and/or Egress")
    return policy["name"]


def node_taints(k8s: dict[str, Any]) -> list[dict[str, str]]:
    """The node's taints (``k8s.taints``, ``key[=value]:Effect``) as ``spec.taints`` lists them."""
    if not isinstance(k8s.get("taints") or [], list):
        raise ProfileError("k8s.taints must be a list of key[=value]:Effect strings")
    taints = []
    for text in k8s.get("taints") or []:
        match = TAINT.match(str(text))
        if not match:
            raise ProfileError(f"k8s.taints: {text!r} is not key[=value]:Effect with Effect one of "
                               f"{list(TAINT_EFFECTS)}")
        key, value, effect = match.groups()
        taints.append({"effect": effect, "key": key, **({"value": value} if value is not None else {})})
    return taints


def pod_and_volume_latency(k8s: dict[str, Any]) -> dict[str, float]:
    """``k8s.latency`` as the API file and the power daemon take it: each key of LATENCY_KEYS, in seconds (0 when
    not set)."""
    latency = k8s.get("latency") or {}
    if not isinstance(latency, dict):
        raise ProfileError(f"k8s.latency must be a mapping with keys from {list(LATENCY_KEYS)}")
    known_mapping("k8s.latency", latency, set(LATENCY_KEYS), error=ProfileError)
    out = {}
    for key in LATENCY_KEYS:
        value = latency.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise ProfileError(f"k8s.latency.{key} must be a number of seconds >= 0 (got {value!r})")
        out[key] = float(value)
    return out
