"""Access & identity checks: every check × every status, from probe outputs written here in the shape
the probes in checks/probes/access.yml print (coreutils id, getent, sudo 1.9, OpenSSH 9 messages)."""

from __future__ import annotations

import pytest

from clustereval import checks
from clustereval.checks import Context
from clustereval.checks.audit_access import ssh_outcome
from clustereval.parsers.probe_key_values import key_values
from tests.helpers import judge as run
from tests.helpers import probe

ROOT = """uid=0
user=root
gid=0
home=/root
getent_user=root:x:0:0:root:/root:/bin/bash
tool_sudo=
tool_useradd=/usr/sbin/useradd
tool_groupadd=/usr/sbin/groupadd
tool_usermod=/usr/sbin/usermod
nss_passwd=files systemd
nss_group=files systemd
pam=pam_unix
pam=pam_env
daemons_checked=yes
"""


def user(**changes: str) -> str:
    """An unprivileged account's identity output, with lines replaced or added."""
    base = {"uid": "1001", "user": "alice", "gid": "1001", "home": "/home/alice",
            "getent_user": "alice:x:1001:1001:Alice:/home/alice:/bin/bash", "tool_sudo": "/usr/bin/sudo",
            "tool_useradd": "/usr/sbin/useradd", "tool_groupadd": "/usr/sbin/groupadd",
            "tool_usermod": "/usr/sbin/usermod",
            "nss_passwd": "files systemd", "nss_group": "files systemd", "daemons_checked": "yes"}
    extra = changes.pop("extra", "")
    base.update(changes)
    return "".join(f"{k}={v}\n" for k, v in base.items() if v is not None) + extra


def identity(stdout: str, **extra) -> dict:
    return probe("access_identity", stdout, cmd="id -u; …", artifact="access-identity.txt", **extra)


def peer(stdout: str, **extra) -> dict:
    return probe("access_ssh_peer", stdout, cmd="ssh …", artifact="access-ssh-peer.txt", **extra)


class TestSudo:
    def test_root_without_a_sudo_binary_is_not_a_finding(self):
        result = run("audit.access.sudo", identity(ROOT))
        assert result["status"] == "pass" and result["value"] == "root"

    def test_passwordless_sudo_passes(self):
        assert run("audit.access.sudo", identity(user(sudo_rc="0")))["status"] == "pass"

    def test_password_required_warns(self):
        result = run("audit.access.sudo", identity(user(sudo_rc="1", extra="sudo_err=sudo: a password is required\n")))
        assert result["status"] == "warn" and result["value"] == "password"

    def test_no_sudo_for_a_normal_user_warns(self):
        result = run("audit.access.sudo", identity(user(tool_sudo="")))
        assert result["status"] == "warn" and "not installed" in result["summary"]

    def test_broken_setuid_fails(self):
        err = "sudo_err=sudo: /usr/bin/sudo must be owned by uid 0 and have the setuid bit set\n"
        result = run("audit.access.sudo", identity(user(sudo_rc="1", extra=err)))
        assert result["status"] == "fail" and result["value"] == "broken"

    def test_missing_id_is_a_skip(self):
        result = run("audit.access.sudo", identity("", rc=127, missing=True, tool="id"))
        assert result["status"] == "skip" and "not installed" in result["summary"]

    def test_timeout_and_garbage_are_errors(self):
        assert run("audit.access.sudo", identity("", timed_out=True, timeout=20))["status"] == "error"
        assert run("audit.access.sudo", identity("garbage\n"))["status"] == "error"
        assert run("audit.access.sudo", identity(user(sudo_rc=None)))["status"] == "error"


class TestUserManagement:
    def test_resolving_account_with_tools_passes(self):
        assert run("audit.access.user_management", identity(ROOT))["status"] == "pass"

    def test_directory_without_local_tools_passes(self):
        out = user(tool_useradd="", tool_groupadd="", nss_passwd="files sss")
        result = run("audit.access.user_management", identity(out))
        assert result["status"] == "pass" and "sss" in result["summary"]

    def test_no_tools_and_no_directory_warns(self):
        result = run("audit.access.user_management", identity(user(tool_useradd="", tool_groupadd="")))
        assert result["status"] == "warn"

    def test_unresolvable_uid_fails(self):
        out = user(user="id: cannot find name for user ID 1001", getent_user="")
        result = run("audit.access.user_management", identity(out))
        assert result["status"] == "fail" and "1001" in result["summary"]

    def test_skip_and_error(self):
        assert run("audit.access.user_management", identity("", rc=127, missing=True))["status"] == "skip"
        assert run("audit.access.user_management", {})["status"] == "error"


class TestExternalIdp:
    def test_sssd_configured_and_running_passes(self):
        out = user(nss_passwd="files sss", extra="pam=pam_sss\nsssd_id_provider=ldap\ndaemon=sssd\n")
        result = run("audit.access.external_idp", identity(out))
        assert result["status"] == "pass" and "ldap" in result["summary"]

    def test_local_accounts_only_warn(self):
        assert run("audit.access.external_idp", identity(ROOT))["status"] == "warn"

    def test_sssd_configured_but_not_running_fails(self):
        out = user(nss_passwd="files [NOTFOUND=return] sss", extra="pam=pam_sss\n")
        result = run("audit.access.external_idp", identity(out))
        assert result["status"] == "fail" and "sssd" in result["summary"]

    def test_oidc_pam_module_needs_no_daemon(self):
        assert run("audit.access.external_idp", identity(user(extra="pam=pam_oauth2_device\n")))["status"] == "pass"

    def test_skip_and_error(self):
        assert run("audit.access.external_idp", identity("", rc=127, missing=True))["status"] == "skip"
        unreadable = user(nss_passwd=None, nss_group=None)
        assert run("audit.access.external_idp", identity(unreadable))["status"] == "error"


class TestSshBetweenNodes:
    def test_works(self):
        result = run("audit.access.ssh_between_nodes", peer("peer=10.0.0.2\nstrict_rc=0\nstrict_out=gpu-002\n"))
        assert result["status"] == "pass" and "gpu-002" in result["summary"]

    def test_unknown_host_key_but_accepted_key_warns(self):
        out = ("peer=10.0.0.2\nstrict_rc=255\nstrict_out=Host key verification failed.\n"
               "loose_rc=0\nloose_out=gpu-002\n")
        result = run("audit.access.ssh_between_nodes", peer(out))
        assert result["status"] == "warn" and result["value"] == "host_key_unknown"

    def test_refused_key_fails(self):
        out = ("peer=10.0.0.2\nstrict_rc=255\nstrict_out=Host key verification failed.\nloose_rc=255\n"
               "loose_out=root@10.0.0.2: Permission denied (publickey).\n")
        result = run("audit.access.ssh_between_nodes", peer(out))
        assert result["status"] == "fail" and result["value"] == "refused"

    def test_unreachable_sshd_fails(self):
        out = "peer=10.0.0.2\nstrict_rc=255\nstrict_out=ssh: connect to host 10.0.0.2 port 22: Connection refused\n"
        assert ssh_outcome(key_values(out, "="))[1] == "unreachable"

    def test_a_peer_the_controller_could_not_reach_either_is_not_this_nodes_fault(self):
        out = "peer=10.0.0.3\nstrict_rc=255\nstrict_out=ssh: connect to host 10.0.0.3 port 22: Connection refused\n"
        live = {"n2": {"gpu_count": 8}}  # the siblings still in the run: n3 dropped out as unreachable
        gone = run("audit.access.ssh_between_nodes", peer(out), fleet=live, peer_name="n3")
        assert gone["status"] == "skip" and "unreachable in this run for the controller too" in gone["summary"]
        # the peer answered the controller: this node cannot reach it, which is this node's finding
        there = run("audit.access.ssh_between_nodes", peer(out), fleet={**live, "n3": {"gpu_count": 8}},
                    peer_name="n3")
        assert there["status"] == "fail" and there["value"] == "unreachable"

    def test_single_node_skips_and_missing_ssh_skips(self):
        assert run("audit.access.ssh_between_nodes", peer("peer=\n"))["status"] == "skip"
        assert run("audit.access.ssh_between_nodes", peer("", rc=127, missing=True, tool="ssh"))["status"] == "skip"

    def test_unresolvable_peer_and_timeout_are_harness_errors(self):
        out = ("peer=gpu-002\nstrict_rc=255\n"
               "strict_out=ssh: Could not resolve hostname gpu-002: Name or service not known\n")
        assert run("audit.access.ssh_between_nodes", peer(out))["status"] == "error"
        assert run("audit.access.ssh_between_nodes", peer("", timed_out=True, timeout=25))["status"] == "error"


def ident(uid: str = "1001", gid: str = "1001", home: str = "/home/alice") -> dict:
    return {"access_identity": {"user": "alice", "uid": uid, "gid": gid, "home": home}, "problems": {},
            "artifacts": {"access_identity": "raw/x/access-identity.txt"}}


class TestFleetIdentity:
    def test_same_everywhere_passes(self):
        result = run("audit.access.fleet_identity", fleet={"a": ident(), "b": ident(), "c": ident()})
        assert result["status"] == "pass" and result["value"] == 3

    def test_other_uid_fails_and_names_the_node(self):
        result = run("audit.access.fleet_identity", fleet={"a": ident(), "b": ident(uid="1002"), "c": ident()})
        assert result["status"] == "fail" and "b (1002)" in result["summary"]

    def test_other_home_warns(self):
        result = run("audit.access.fleet_identity", fleet={"a": ident(), "b": ident(home="/data/alice"), "c": ident()})
        assert result["status"] == "warn"

    def test_one_node_skips_and_unreadable_nodes_error(self):
        assert run("audit.access.fleet_identity", fleet={"a": ident(), "b": None})["status"] == "skip"
        broken = {"problems": {"access_identity": "probe timed out"}}
        assert run("audit.access.fleet_identity", fleet={"a": ident(), "b": broken})["status"] == "error"

    def test_facts_come_from_the_identity_probe(self):
        facts = checks.host_facts(Context(subject="n1", probes=identity(ROOT)))
        assert facts["access_identity"] == {"user": "root", "uid": "0", "gid": "0", "home": "/root"}


@pytest.mark.parametrize("check_id", ["audit.access.sudo", "audit.access.user_management",
                                      "audit.access.external_idp", "audit.access.ssh_between_nodes"])
def test_probe_failure_is_the_clusters_fault(check_id):
    probes = {**identity("", rc=2), **peer("", rc=2)}
    assert run(check_id, probes)["status"] == "fail"
