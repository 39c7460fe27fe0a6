"""Audit checks, access & identity: admin access, account management, SSH between nodes, identity provider.

The probes (``checks/probes/access.yml``) print ``key=value`` lines from coreutils ``id``, glibc
``getent``, sudo 1.8/1.9 (``sudo -n true``), ``/etc/nsswitch.conf``, ``/etc/pam.d``, ``/etc/sssd``,
procps ``pgrep`` and OpenSSH 7–9 client messages ("Permission denied (publickey)", "Host key
verification failed.", "Connection refused", "Connection timed out", "Could not resolve hostname").
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from clustereval.checks import Context, HarnessError, ProbeFailed, Skip, Verdict, check, facts
from clustereval.parsers.probe_key_values import first
from clustereval.results import worst

IDENTITY_PROBE = "access_identity"
SSH_PROBE = "access_ssh_peer"

# NSS sources that mean accounts come from a directory, not the node's own files.
DIRECTORY_NSS = {"sss", "ldap", "winbind", "nis", "nisplus", "kanidm", "oslogin", "cache_oslogin", "himmelblau"}
# PAM modules that authenticate against an external identity provider.
IDP_PAM = {"pam_sss", "pam_ldap", "pam_krb5", "pam_winbind", "pam_oauth2", "pam_oauth2_device", "pam_okta",
           "pam_oidc", "pam_kanidm", "pam_oslogin_login", "pam_oslogin_admin", "pam_aad", "pam_himmelblau"}
# The daemon an NSS source needs running to answer lookups.
NSS_DAEMON = {"sss": "sssd", "ldap": "nslcd", "winbind": "winbindd"}
# sudo's own words when sudo itself is broken, not merely refusing this user.
SUDO_BROKEN = ("must be owned by uid 0 and have the setuid bit set", "effective uid is not 0",
               "parse error", "syntax error", "no valid sudoers sources found", "unable to initialize policy")
SUDO_REFUSED = ("a password is required", "a terminal is required", "is not in the sudoers file",
                "may not run sudo", "not allowed to execute", "askpass")


def values(ctx: Context, probe: str) -> dict[str, list[str]]:
    """A ``key=value`` probe's lines as ``{key: [values…]}`` (parser ``probe-key-equals-value``)."""
    return ctx.parsed(probe)["values"]


def _identity(ctx: Context) -> dict[str, list[str]]:
    data = values(ctx, IDENTITY_PROBE)
    if not first(data, "uid").isdigit():
        raise HarnessError(f"the identity probe printed no numeric uid: {first(data, 'uid')!r}")
    return data


def nss_sources(line: str) -> list[str]:
    """Sources of an nsswitch.conf database line (``files sss [NOTFOUND=return] systemd`` -> names)."""
    return [word for word in line.split() if not word.startswith("[")]


@check("audit.access.sudo")
def sudo(ctx: Context) -> Verdict:
    data = _identity(ctx)
    uid, user = int(first(data, "uid")), first(data, "user")
    sudo_path = first(data, "tool_sudo")
    rc = first(data, "sudo_rc")
    errors = data.get("sudo_err") or []
    evidence = {"uid": uid, "user": user, "sudo": sudo_path or None, "sudo_rc": rc or None, "sudo_err": errors}
    message = " ".join(errors).lower()
    if uid == 0:
        # Root needs no sudo binary: the access the check asks about is already there.
        return Verdict("pass", f"the evaluation account is root{' (sudo also installed)' if sudo_path else ''}",
                       "root", evidence=evidence)
    if not sudo_path:
        return Verdict("warn", f"{user} is not root and sudo is not installed: no administrative access",
                       "none", evidence=evidence)
    if rc == "0":
        return Verdict("pass", f"{user} has passwordless sudo", "sudo", evidence=evidence)
    if not rc.isdigit():
        raise HarnessError(f"the identity probe did not report sudo's exit status ({rc!r})")
    if any(sign in message for sign in SUDO_BROKEN):
        return Verdict("fail", f"sudo is broken on {ctx.subject}: {' '.join(errors)[:200]}", "broken",
                       evidence=evidence)
    if any(sign in message for sign in SUDO_REFUSED):
        return Verdict("warn", f"{user} has no passwordless sudo ({' '.join(errors)[:160]})", "password",
                       evidence=evidence)
    detail = " ".join(errors)[:160] or "no output"
    return Verdict("warn", f"`sudo -n true` failed for {user} with status {rc}: {detail}", "refused",
                   evidence=evidence)


@check("audit.access.user_management")
def user_management(ctx: Context) -> Verdict:
    data = _identity(ctx)
    uid, user = first(data, "uid"), first(data, "user")
    entry = first(data, "getent_user")
    tools = {name: first(data, f"tool_{name}") or None for name in ("useradd", "groupadd", "usermod")}
    sources = nss_sources(first(data, "nss_passwd"))
    directory = sorted(set(sources) & DIRECTORY_NSS)
    evidence = {"uid": uid, "user": user, "passwd_entry": entry or None, "tools": tools, "nss_passwd": sources}
    if not entry or user.isdigit() or "cannot find name" in user:
        return Verdict("fail", f"UID {uid} has no account entry (`getent passwd {uid}` finds nothing): "
                       "SSH, Slurm and file ownership break for it", "unresolved", evidence=evidence)
    missing = [name for name in ("useradd", "groupadd") if not tools[name]]
    if missing and not directory:
        return Verdict("warn", f"{' and '.join(missing)} not installed and no directory service in "
                       "nsswitch.conf: accounts cannot be managed on this node", "unmanaged", evidence=evidence)
    how = f"directory ({', '.join(directory)})" if directory else "local tools (useradd, groupadd)"
    if missing:
        # The directory manages the accounts, so the local tools are not needed: not a problem, said as such.
        how = f"directory ({', '.join(directory)}), which needs no local {' or '.join(missing)}"
    return Verdict("pass", f"{user} (UID {uid}) resolves; accounts managed through {how}", "ok", evidence=evidence)


@check("audit.access.external_idp")
def external_idp(ctx: Context) -> Verdict:
    data = _identity(ctx)
    passwd = nss_sources(first(data, "nss_passwd"))
    directory = [source for source in passwd if source in DIRECTORY_NSS]
    pam = sorted(set(data.get("pam") or []) & IDP_PAM)
    providers = data.get("sssd_id_provider") or []
    daemons = set(data.get("daemon") or [])
    checked = first(data, "daemons_checked") == "yes"
    evidence = {"nss_passwd": passwd, "directory_sources": directory, "idp_pam_modules": pam,
                "sssd_id_providers": providers, "daemons": sorted(daemons), "daemons_checked": checked}
    if not first(data, "nss_passwd") and not data.get("pam"):
        raise HarnessError("could read neither /etc/nsswitch.conf nor /etc/pam.d on this node")
    if not directory and not pam:
        return Verdict("warn", "no external identity provider: accounts are local to each node "
                       f"(passwd: {' '.join(passwd) or 'files'})", "local", evidence=evidence)
    needed = {NSS_DAEMON[source] for source in directory if source in NSS_DAEMON}
    if "pam_sss" in pam:
        needed.add("sssd")
    stopped = sorted(needed - daemons)
    if stopped and checked:
        return Verdict("fail", f"the directory is configured ({', '.join(directory + pam)}) but "
                       f"{', '.join(stopped)} is not running: directory users cannot log in", "down",
                       evidence=evidence)
    names = ", ".join(directory + pam) + (f" (SSSD provider {', '.join(providers)})" if providers else "")
    if stopped:
        return Verdict("warn", f"directory configured ({names}) but whether {', '.join(stopped)} runs was not "
                       "checked (no pgrep)", "unverified", evidence=evidence)
    return Verdict("pass", f"accounts from an external identity provider: {names}", "directory", evidence=evidence)


def ssh_outcome(data: dict[str, list[str]]) -> tuple[str, str, str]:
    """(status, value, summary) of an OpenSSH BatchMode ``hostname`` attempt from the peer probe."""
    peer = first(data, "peer")
    strict_rc, strict_out = first(data, "strict_rc"), data.get("strict_out") or []
    text = " ".join(strict_out)
    if not strict_rc.isdigit():
        raise HarnessError(f"the SSH probe did not report ssh's exit status (peer {peer!r})")
    if strict_rc == "0":
        return "pass", "ok", f"ssh {peer} works without a password or prompt (remote hostname {text or '?'})"
    if "Host key verification failed" in text:
        loose_rc, loose = first(data, "loose_rc"), " ".join(data.get("loose_out") or [])
        if loose_rc == "0":
            return ("warn", "host_key_unknown", f"keys are accepted by {peer} but its host key is not known here: "
                    "BatchMode SSH (mpirun, pdsh) stops at 'Host key verification failed'")
        text = loose or text
    if "Could not resolve hostname" in text:
        raise HarnessError(f"this node cannot resolve the peer address the harness gave ({peer}): {text[:200]}")
    if "Permission denied" in text:
        return "fail", "refused", f"{peer} refuses this node's keys: {text[:200]}"
    if any(sign in text for sign in ("Connection refused", "timed out", "No route to host",
                                     "Network is unreachable", "Connection closed", "Connection reset")):
        return "fail", "unreachable", f"cannot reach sshd on {peer}: {text[:200]}"
    return "fail", "failed", f"ssh {peer} hostname failed (status {strict_rc}): {text[:200] or 'no output'}"


@check("audit.access.ssh_between_nodes")
def ssh_between_nodes(ctx: Context) -> Verdict:
    data = values(ctx, SSH_PROBE)
    if "peer" not in data:
        raise HarnessError("the SSH probe printed no peer line")
    peer = first(data, "peer")
    if not peer:
        raise Skip("only one node in the evaluation: no other node to SSH to")
    status, value, summary = ssh_outcome(data)
    evidence = {key: data.get(key) for key in ("peer", "strict_rc", "strict_out", "loose_rc", "loose_out")
                if key in data}
    peer_name = str(ctx.options.get("peer_name") or "")
    if value in ("unreachable", "failed") and ctx.fleet and peer_name and peer_name not in ctx.fleet:
        # The peer is gone from the run (the controller could not reach it either): no finding about this node.
        # `unreachable_peer` tells `clustereval resume` to try again once the peer is back.
        return Verdict("skip", f"{peer} ({peer_name}) is unreachable in this run for the controller too, so SSH "
                       f"from {ctx.subject} to it says nothing about {ctx.subject} ({summary})",
                       evidence={**evidence, "unreachable_peer": peer_name})
    return Verdict(status, summary, value, evidence=evidence)


@facts(probes=[IDENTITY_PROBE])
def access_facts(ctx: Context) -> dict[str, Any]:
    """The evaluation account's identity on this node, for the fleet identity check."""
    out: dict[str, Any] = {"problems": {}}
    try:
        data = _identity(ctx)
    except (Skip, HarnessError, ProbeFailed) as exc:
        out["problems"]["access_identity"] = str(exc)
        return out
    entry = first(data, "getent_user").split(":")
    out["access_identity"] = {"user": first(data, "user"), "uid": first(data, "uid"), "gid": first(data, "gid"),
                              "home": entry[5] if len(entry) > 5 else first(data, "home")}
    if IDENTITY_PROBE in ctx.probes:
        out["artifacts"] = {"access_identity": ctx.probes[IDENTITY_PROBE].get("artifact")}
    return out


@check("audit.access.fleet_identity")
def fleet_identity(ctx: Context) -> Verdict:
    identities, missing, harness = {}, [], {}
    for host, known in sorted(ctx.fleet.items()):
        if known and known.get("access_identity"):
            identities[host] = known["access_identity"]
            artifact = (known.get("artifacts") or {}).get("access_identity")
            if artifact:
                ctx.extra_artifacts.append(artifact)
        else:
            missing.append(host)
            problem = ((known or {}).get("problems") or {}).get("access_identity")
            if problem:
                harness[host] = problem
    if len(identities) < 2:
        if harness and len(identities) + len(harness) >= 2:
            detail = "; ".join(f"{h}: {p}" for h, p in harness.items())
            raise HarnessError(f"could not read the account's identity on enough nodes: {detail[:400]}")
        raise Skip(f"fewer than two nodes reported the evaluation account (not assessed: {', '.join(missing) or '-'})")
    evidence: dict[str, Any] = {"nodes_assessed": len(identities), "not_assessed": missing}
    findings, levels = [], []
    for key, label, level in (("user", "account name", "warn"), ("uid", "UID", "fail"), ("gid", "GID", "fail"),
                              ("home", "home directory", "warn")):
        values = {host: ident.get(key) for host, ident in identities.items()}
        majority = Counter(values.values()).most_common(1)[0][0]
        odd = {host: value for host, value in values.items() if value != majority}
        evidence[key] = {"fleet": majority, "odd_nodes": odd}
        if odd:
            findings.append(f"{label} differs on {', '.join(f'{h} ({v})' for h, v in odd.items())} "
                            f"from the fleet's {majority}")
            levels.append(level)
    if findings:
        return Verdict(worst(levels), "; ".join(findings), len(identities), evidence=evidence)
    sample = next(iter(identities.values()))
    return Verdict("pass", f"{len(identities)} nodes agree: {sample['user']} is UID {sample['uid']}, "
                   f"GID {sample['gid']}, home {sample['home']}", len(identities), evidence=evidence)
