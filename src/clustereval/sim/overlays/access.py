"""Access & identity as a simulated node shows it: root's SSH key for the other nodes, and the NSS/PAM
identity configuration.

Settings (``access:`` in a profile, per node or cluster-wide), healthy defaults in code:
``ssh_between_nodes`` (true: root on each node holds the cluster key in ``/root/.ssh`` with the nodes'
host key in ``known_hosts``, as a cluster set up for node-to-node SSH does) and ``idp`` (``local``:
accounts in /etc/passwd only; ``sssd``: nsswitch and PAM use SSSD, whose daemon the simulation never
runs, so directory lookups are down). Faults override them: ``access_ssh_between_nodes`` (bool) and
``access_idp`` (``local`` | ``sssd``).

Root's shell start-up files are the stock ones of a fresh Debian install (base-files' ``dot.bashrc`` and
``dot.profile``): the host's own (pyenv, cargo, ...) are not the node's, and sshd runs ``~/.bashrc`` for every
command, so a host's heavy start-up file would slow every simulated SSH exchange.

Only files inside the node's mount namespace change (the overlay over ``/root`` and ``/etc``); the
host's own ``/root/.ssh`` is never written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

FAULTS = {"access_ssh_between_nodes", "access_idp"}


def _setting(settings: dict[str, Any], key: str, default: Any) -> Any:
    faults = settings.get("faults") or {}
    if f"access_{key}" in faults:
        return faults[f"access_{key}"]
    return (settings.get("access") or {}).get(key, default)


def _cluster_ssh_dir(tree) -> Path | None:
    """The simulated cluster's ``D/ssh`` (client key and host key)."""
    if tree.cluster_dir is None:
        return None
    ssh = Path(tree.cluster_dir) / "ssh"
    return ssh if (ssh / "id_ed25519").is_file() else None


STOCK_HOME = {".bashrc": "/usr/share/base-files/dot.bashrc", ".profile": "/usr/share/base-files/dot.profile"}
# What Debian 12's base-files ships, for hosts without that package.
STOCK_FALLBACK = {".bashrc": "# ~/.bashrc: executed by bash(1) for non-login shells.\n",
                  ".profile": "# ~/.profile: executed by Bourne-compatible login shells.\n\n"
                              "if [ \"$BASH\" ]; then\n  if [ -f ~/.bashrc ]; then\n    . ~/.bashrc\n  fi\nfi\n\n"
                              "mesg n 2> /dev/null || true\n"}


def _stock_home(name: str) -> str:
    try:
        return Path(STOCK_HOME[name]).read_text()
    except OSError:
        return STOCK_FALLBACK[name]


def render(settings: dict[str, Any], state: dict[str, Any], tree) -> None:
    for name in STOCK_HOME:
        tree.file(f"/root/{name}", _stock_home(name), 0o644)
    if _setting(settings, "ssh_between_nodes", True):
        ssh = _cluster_ssh_dir(tree)
        if ssh is not None:
            tree.file("/root/.ssh/id_ed25519", (ssh / "id_ed25519").read_text(), 0o600)
            tree.file("/root/.ssh/id_ed25519.pub", (ssh / "id_ed25519.pub").read_text(), 0o644)
            host_key = (ssh / "ssh_host_ed25519_key.pub").read_text().split()
            # The nodes listen on loopback addresses; one host key serves the whole simulated cluster.
            tree.file("/root/.ssh/known_hosts", f"127.* {host_key[0]} {host_key[1]}\n", 0o644)
            tree.file("/root/.ssh/config", "Host 127.* node*\n    IdentityFile ~/.ssh/id_ed25519\n"
                      "    BatchMode yes\n", 0o600)
    if _setting(settings, "idp", "local") == "sssd":
        try:
            host = Path("/etc/nsswitch.conf").read_text()
        except OSError:
            host = "passwd: files\ngroup: files\n"
        lines = []
        for line in host.splitlines():
            key = line.split(":", 1)[0].strip()
            if key in ("passwd", "group", "shadow") and "sss" not in line:
                line = f"{line} sss"
            lines.append(line)
        tree.file("/etc/nsswitch.conf", "\n".join(lines) + "\n")
        tree.file("/etc/sssd/sssd.conf", "[sssd]\nservices = nss, pam\ndomains = corp\n\n[domain/corp]\n"
                  "id_provider = ldap\nauth_provider = ldap\nldap_uri = ldaps://ldap.corp.example\n"
                  "ldap_search_base = dc=corp,dc=example\n", 0o600)
        tree.file("/etc/pam.d/common-auth-sss", "auth [success=1 default=ignore] pam_sss.so use_first_pass\n")
