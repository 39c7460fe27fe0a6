"""AMD Instinct audit: can a job open the GPUs? (``audit.amd.device_access``).

A ROCm process opens ``/dev/kfd`` (the compute interface every HIP/HSA program needs) and the render node
of every GPU it uses (``/dev/dri/renderD*``); AMD's install guide has the job users in the ``render`` and
``video`` groups, and ROCm's container guide passes ``--device=/dev/kfd --device=/dev/dri`` with those
groups. The probe (``amd_devices``, probes/amd.yml) reads the device nodes' modes and groups, which PCI
device each render node belongs to (its ``device/uevent``), the accounts, the udev rules and the container
runtimes' handling of ``/dev``; :mod:`clustereval.parsers.probe_amd_devices` reads its lines.

The job user is the account named by the probe parameter ``job_user`` where one is given, else the account
the audit runs as (the tenant's account: its jobs run as it). An audit run as root cannot speak for a job
user: then a device is open to jobs when its mode grants read/write to everyone or to a group other than
root's (the members, as the group database lists them, are evidence).
"""

from __future__ import annotations

from typing import Any

from clustereval.checks import Context, HarnessError, Skip, Verdict, check
from clustereval.parsers import ParseError
from clustereval.parsers.probe_amd_devices import device_entry, drm_entry, group_row, identity
from clustereval.parsers.probe_key_values import first

PROBE = "amd_devices"
NODE = "amd_node"
KFD = "/dev/kfd"
AMD_VENDOR = "1002"
# enroot's boolean settings (enroot.conf): these turn ENROOT_RESTRICT_DEV on.
ENROOT_TRUE = {"y", "yes", "true", "1", "on"}
SOURCE = "ROCm install guide (render and video groups) and 'Running ROCm Docker containers' (--device=/dev/kfd " \
         "--device=/dev/dri)"


def _values(ctx: Context) -> dict[str, list[str]]:
    data = ctx.parsed(PROBE)["values"]
    if first(data, "end") != "ok":
        raise HarnessError(f"the AMD device probe ended early on {ctx.subject} (no end=ok line)")
    return data


def _pci_gpus(ctx: Context) -> int:
    data = ctx.parsed(NODE)["values"]
    if first(data, "end") != "ok":
        raise HarnessError(f"the AMD node probe ended early on {ctx.subject} (no end=ok line)")
    text = first(data, "amd_pci_gpus", "0")
    return int(text) if text.isdigit() else 0


def _read(data: dict[str, list[str]]) -> dict[str, Any]:
    """The probe's lines read (HarnessError naming the line that cannot be)."""
    try:
        devices = {d["path"]: d for d in (device_entry(v) for v in data.get("dev") or [])}
        drm = [drm_entry(v) for v in data.get("drm") or []]
        groups = {g["name"]: g for g in (group_row(v) for v in data.get("group") or [])}
        me = identity(first(data, "id"))
        job = None
        if first(data, "job_user"):
            try:
                job = identity(first(data, "job_id"))
            except ParseError:
                raise HarnessError(f"the job user {first(data, 'job_user')!r} is unknown on the node: "
                                   f"{first(data, 'job_id')[:200]}") from None
    except ParseError as exc:
        raise HarnessError(f"could not read the AMD device probe: {exc}") from None
    opened = {}
    for value in data.get("open") or []:
        path, _, how = value.rpartition(" ")
        opened[path] = how
    return {"devices": devices, "drm": drm, "groups": groups, "me": me, "job": job, "opened": opened}


def _grant(device: dict[str, Any], user: dict[str, Any] | None) -> str | None:
    """How ``user`` gets read/write on ``device`` by its mode ("owner", "group render", "everyone"), None when it
    does not; for ``user`` None (an audit as root) how an unprivileged account can (everyone, a non-root group)."""
    mode = device["mode"]
    if user is None:
        if mode & 0o006 == 0o006:
            return "everyone"
        if mode & 0o060 == 0o060 and device["gid"] != 0:
            return f"group {device['group']}"
        return None
    if user["uid"] == 0:
        return "root"
    if device["owner"] == user["user"]:
        return "owner" if mode & 0o600 == 0o600 else None
    if device["gid"] in user["groups"]:
        return f"group {device['group']}" if mode & 0o060 == 0o060 else None
    return "everyone" if mode & 0o006 == 0o006 else None


def _mode(device: dict[str, Any]) -> str:
    return f"{device['path']} {device['mode']:04o} {device['owner']}:{device['group']}"


def _containers(data: dict[str, list[str]]) -> str | None:
    """Why enroot (pyxis) containers would not see the GPUs, or None."""
    restrict = first(data, "enroot_restrict_dev")
    if not restrict or restrict.lower() not in ENROOT_TRUE:
        return None
    mounts = [m.split()[-1] for m in data.get("enroot_mount") or []]
    if data.get("enroot_hook") or (KFD in mounts and any(m.startswith("/dev/dri") for m in mounts)):
        return None
    return ("enroot restricts /dev in containers (ENROOT_RESTRICT_DEV) and no enroot mount or hook adds /dev/kfd "
            "and /dev/dri: jobs in enroot/pyxis containers do not see the GPUs")


@check("audit.amd.device_access")
def device_access(ctx: Context) -> Verdict:
    gpus = _pci_gpus(ctx)
    if not gpus:
        raise Skip("no AMD GPU on this node (none on the PCI bus)")
    data = _values(ctx)
    seen = _read(data)
    devices, me, job = seen["devices"], seen["me"], seen["job"]
    # the job user: the named one, else the audit's own account unless it is root
    user = job or (me if me["uid"] != 0 else None)
    who = (f"job user {user['user']}" if job else f"the audit account {user['user']}") if user else \
        "an unprivileged job user (the audit ran as root)"
    gpu_nodes = [d for d in seen["drm"] if d["node"].startswith("renderD")
                 and (d["vendor"] == AMD_VENDOR or d["driver"] == "amdgpu")]
    other_nodes = [d for d in seen["drm"] if d["node"].startswith("renderD") and d not in gpu_nodes]
    evidence: dict[str, Any] = {
        "job_user": user["user"] if user else None, "job_user_source": "job_user" if job else (
            "audit account" if user else None),
        "job_user_groups": sorted(user["groups"].values()) if user else None,
        "pci_gpus": gpus, "gpu_render_nodes": {d["node"]: d["bdf"] for d in gpu_nodes},
        "devices": {p: f"{d['mode']:04o} {d['owner']}:{d['group']}" for p, d in devices.items()},
        "groups": {n: g["members"] for n, g in seen["groups"].items()},
        "udev": data.get("udev") or [], "containers": {k: data.get(k) for k in (
            "enroot_restrict_dev", "enroot_mount", "enroot_hook", "docker", "cdi", "docker_amd_runtime")
            if data.get(k)}}

    def verdict(status: str, summary: str, value: int = 0) -> Verdict:
        """``value``: the GPU device nodes the job user cannot open (a missing one counted)."""
        return Verdict(status, summary, value, unit="devices",
                       expected={"equals": 0, "source": SOURCE}, evidence=evidence)

    kfd = devices.get(KFD)
    if kfd is None:
        return verdict("fail", f"no /dev/kfd while {gpus} AMD GPU(s) are on the PCI bus: no ROCm program can run "
                       "(amdgpu not loaded, or its KFD failed to initialise: check dmesg for kfd)", 1)
    if kfd["type"] != "char":
        return verdict("fail", f"/dev/kfd is a {kfd['type']}, not the KFD character device", 1)
    if not gpu_nodes:
        return verdict("fail", f"no DRM render node belongs to the {gpus} AMD GPU(s) (/sys/class/drm/renderD*): "
                       "ROCm sees no GPU", gpus)
    needed = [(KFD, kfd)]
    denied: list[str] = []
    for node in gpu_nodes:
        path = f"/dev/dri/{node['node']}"
        if path not in devices:
            denied.append(f"{path} ({node['bdf'] or '?'}) missing")
        else:
            needed.append((path, devices[path]))
    # the probe's own open test speaks for the audit account (ACLs such as udev's uaccess included)
    own_test = user is not None and not job
    for path, device in needed:
        grant = _grant(device, user)
        if grant is None and own_test and seen["opened"].get(path) == "rw":
            grant = "an ACL"
        if grant is None:
            bdf = next((f" ({n['bdf']})" for n in gpu_nodes if f"/dev/dri/{n['node']}" == path and n["bdf"]), "")
            denied.append(f"{_mode(device)}{bdf}")
        evidence.setdefault("grants", {})[path] = grant
    if denied:
        groups = sorted({d["group"] for _, d in needed if d["gid"] != 0})
        hint = (f"; {user['user']} is not in {', '.join(groups)}" if user and groups
                and not any(d["gid"] in user["groups"] for _, d in needed) else "")
        return verdict("fail", f"{who} cannot open {len(denied)} of the GPU device node(s): "
                       f"{'; '.join(denied[:6])}{hint}", len(denied))
    problems = []
    world = [path for path, d in needed if d["mode"] & 0o006 == 0o006]
    if world:
        problems.append(f"{len(world)} GPU device node(s) are world read/write ({', '.join(world[:4])}"
                        f"{' …' if len(world) > 4 else ''}): every account on the node can reach every GPU unless "
                        "the scheduler's device cgroup confines jobs")
    unreadable = []
    for node in other_nodes:
        device = devices.get(f"/dev/dri/{node['node']}")
        if device is not None and _grant(device, user) is None:
            unreadable.append(f"{_mode(device)} ({node['driver'] or node['vendor'] or 'unknown device'})")
    if unreadable:
        problems.append(f"render node(s) of other devices not open to {who}: {'; '.join(unreadable[:4])} "
                        "(ROCm enumerates every render node and logs errors for these)")
    container = _containers(data)
    if container:
        problems.append(container)
    if problems:
        return verdict("warn", "; ".join(problems))
    grants = sorted({g for g in evidence["grants"].values() if g})
    members = {g: seen["groups"][g]["members"] for g in (x.removeprefix("group ") for x in grants)
               if g in seen["groups"]}
    said = f" (members: {'; '.join(f'{g}: ' + (', '.join(m) or 'none listed') for g, m in members.items())})" \
        if user is None and members else ""
    return verdict("pass", f"{who} can open /dev/kfd and the {len(gpu_nodes)} GPU render node(s) "
                   f"(through {', '.join(grants)}){said}")
