"""The evaluation account of a simulated node: a non-root user the inventory logs in as, with or without sudo.

Profile key ``evaluator: {user: eval, sudo: none|passwordless|password, groups: [docker]}`` (cluster level;
``sudo`` and ``groups`` may be overridden per node; ``groups``: supplementary groups, of which ``docker`` is
understood: where Docker is installed the user may use its socket). Unset, the inventory logs in as root, as
before. Set, every node shows the user in its own ``/etc/passwd``, ``/etc/shadow`` and ``/etc/group`` (the
host's entries plus this one, in the node's mount namespace: the host's files never change), a home directory
with the cluster key for node-to-node SSH, and for ``sudo: passwordless`` / ``password`` a ``/etc/sudoers.d``
rule (``NOPASSWD: ALL`` / ``ALL``: ``sudo -n`` then says ``sudo: a password is required``). The inventory's
``ansible_user`` is the user; the cluster key is authorised for it (sshd's AuthorizedKeysFile is the cluster's
one file).

The home directory is node-local (``/var/lib/<user>``), not on the shared filesystem: the simulated
storage host serves SSHFS from one root SFTP session, so every file the user created there would be
root's. Its files are chowned to the user once written (cluster.py, :func:`home_owner`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from clustereval.sim.keys import known_mapping
from clustereval.sim.overlays._files import append_lines

EVALUATOR_KEYS = {"user", "sudo", "groups"}
KNOWN_GROUPS = ("docker",)
SUDO_MODES = ("none", "passwordless", "password")
FIRST_UID = 2000
# The node's PATH (cluster.NODE_PATH): sudo's secure_path would otherwise drop the node's own tools.
NODE_PATH = "/sim/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_USER = re.compile(r"^[a-z_][a-z0-9_-]{0,30}$")


def evaluator(settings: dict[str, Any]) -> dict[str, Any] | None:
    """``{"user", "sudo", "uid", "home"}``, or None when the inventory logs in as root (ValueError naming the key)."""
    given = settings.get("evaluator")
    if not given:
        return None
    known_mapping("evaluator", given, EVALUATOR_KEYS, required="user")
    user, sudo = str(given["user"]), str(given.get("sudo", "none"))
    if not _USER.match(user) or user == "root":
        raise ValueError(f"evaluator.user {user!r} is not a plain non-root user name")
    if sudo not in SUDO_MODES:
        raise ValueError(f"evaluator.sudo {sudo!r} is none of {', '.join(SUDO_MODES)}")
    groups = given.get("groups") or []
    if not isinstance(groups, list) or set(groups) - set(KNOWN_GROUPS):
        raise ValueError(f"evaluator.groups {groups!r}: only {', '.join(KNOWN_GROUPS)} is understood")
    return {"user": user, "sudo": sudo, "uid": free_uid(user), "home": f"/var/lib/{user}", "groups": groups}


def validate_settings(settings: dict[str, Any]) -> None:
    evaluator(settings)


def free_uid(user: str, passwd: Path = Path("/etc/passwd")) -> int:
    """The user's uid on the host if it has one, else the first uid from 2000 the host does not use (the
    same on every node: they all start from the host's files)."""
    used: dict[int, str] = {}
    for line in passwd.read_text(encoding="utf-8").splitlines():
        fields = line.split(":")
        if len(fields) > 2 and fields[2].isdigit():
            used[int(fields[2])] = fields[0]
    for uid, name in used.items():
        if name == user:
            return uid
    uid = FIRST_UID
    while uid in used:
        uid += 1
    return uid


def _cluster_key(tree) -> Path | None:
    if tree.cluster_dir is None:
        return None
    key = Path(tree.cluster_dir) / "ssh" / "id_ed25519"
    return key if key.is_file() else None


def render(settings: dict[str, Any], state: dict[str, Any], tree) -> None:
    account = evaluator(settings)
    if account is None:
        return
    user, uid, home = account["user"], account["uid"], account["home"]
    existing = {line.split(":")[0] for line in Path("/etc/passwd").read_text(encoding="utf-8").splitlines()}
    if user not in existing:
        append_lines(tree, "/etc/passwd", [f"{user}:x:{uid}:{uid}:clustereval evaluation account:{home}:/bin/bash"])
        append_lines(tree, "/etc/group", [f"{user}:x:{uid}:"])
        append_lines(tree, "/etc/shadow", [f"{user}:*:20000:0:99999:7:::"])
    for name, stock in (("bashrc", "dot.bashrc"), ("profile", "dot.profile")):
        source = Path("/usr/share/base-files") / stock
        tree.file(f"{home}/.{name}", source.read_text() if source.is_file() else "", 0o644)
    key = _cluster_key(tree)
    if key is not None:
        tree.file(f"{home}/.ssh/id_ed25519", key.read_text(), 0o600)
        tree.file(f"{home}/.ssh/id_ed25519.pub", key.with_suffix(".pub").read_text(), 0o644)
        host_key = (key.parent / "ssh_host_ed25519_key.pub").read_text().split()
        tree.file(f"{home}/.ssh/known_hosts", f"127.* {host_key[0]} {host_key[1]}\n", 0o644)
        tree.file(f"{home}/.ssh/config", "Host 127.* node*\n    IdentityFile ~/.ssh/id_ed25519\n"
                  "    BatchMode yes\n", 0o600)
    # The node's own name resolves (Debian's installer line), or sudo warns "unable to resolve host" each run.
    append_lines(tree, "/etc/hosts", [f"127.0.1.1\t{state.get('node', '')}"])
    rule = {"passwordless": "NOPASSWD: ALL", "password": "ALL"}.get(account["sudo"])
    if rule:
        tree.file(f"/etc/sudoers.d/90-{user}", f'Defaults:{user} secure_path="{NODE_PATH}"\n'
                  f"{user} ALL=(ALL:ALL) {rule}\n", 0o440)


def home_owner(settings: dict[str, Any]) -> tuple[str, int] | None:
    """``(home, uid)`` whose overlay files cluster.py hands to the user after they are written."""
    account = evaluator(settings)
    return (account["home"], account["uid"]) if account else None
