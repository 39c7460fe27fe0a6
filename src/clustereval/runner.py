"""Drive ``playbooks/evaluate.yml`` through ansible-runner, with progress, into a run directory.

Both entry points (``ansible-playbook`` and ``clustereval evaluate``) run the same playbook with the
same ``clustereval.gpu.results`` callback, so they produce the same run directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clustereval import results, run_control, runinfo
from clustereval.runinfo import default_run_dir

# Exit status of an interrupted run, as a shell reports a process killed by the signal (128 + its number).
INTERRUPTED_RC = {"SIGINT": 130, "SIGTERM": 143}


# Where `pip install clustereval` puts the collection it ships (setup.py copies it at build time).
SHIPPED_COLLECTION = Path(__file__).resolve().parent / "_collection" / "ansible_collections" / "clustereval" / "gpu"


def project_root() -> Path:
    """The collection root holding playbooks/, roles/ and ansible.cfg: ``CLUSTEREVAL_HOME`` when set, else the
    checkout this package runs from (an editable install), else the collection shipped inside the package."""
    env = os.environ.get("CLUSTEREVAL_HOME")
    candidates = [Path(env)] if env else [Path(__file__).resolve().parents[2], SHIPPED_COLLECTION]
    for root in candidates:
        if (root / "playbooks" / "evaluate.yml").exists():
            return root
    raise FileNotFoundError(f"no playbooks/evaluate.yml under {' or '.join(map(str, candidates))}; set "
                            "CLUSTEREVAL_HOME to a checkout or an installed clustereval.gpu collection")


def collections_path_of(root: Path) -> str | None:
    """The collections path that makes ``root`` the ``clustereval.gpu`` collection, when it is an installed
    copy (``.../ansible_collections/clustereval/gpu``); None for a checkout (its ansible.cfg says)."""
    resolved = root.resolve()
    if resolved.parent.parent.name == "ansible_collections":
        return str(resolved.parent.parent.parent)
    return None


def ansible_env(root: Path) -> dict[str, str]:
    """The settings every ansible-playbook this package starts needs: the collection's ansible.cfg (results
    callback, roles path) and, for an installed copy, the collections path that holds it."""
    env = {"ANSIBLE_CONFIG": str(root / "ansible.cfg")}
    shipped_path = collections_path_of(root)
    if shipped_path:
        env["ANSIBLE_COLLECTIONS_PATH"] = shipped_path
    return env


def _progress_printer(stream) -> Callable[[dict[str, Any]], bool]:
    seen_hosts: set[str] = set()
    done = {"checks": 0}

    def handle(event: dict[str, Any]) -> bool:
        data = event.get("event_data") or {}
        res = data.get("res") or {}
        name = event.get("event")
        if name == "runner_on_unreachable":
            print(f"  UNREACHABLE  {data.get('host')}: {str(res.get('msg', ''))[:160]}", file=stream, flush=True)
        if name == "playbook_on_play_start":
            print(f"== {data.get('play')}", file=stream, flush=True)
        try:
            items = results.from_task_result(res)
        except ValueError:
            items = []  # the results callback records the harness error
        for item in items:
            done["checks"] += 1
            seen_hosts.add(item.get("subject", "?"))
            print(f"  [{done['checks']:4d} checks, {len(seen_hosts):3d} subjects] {item.get('status', '?'):5s} "
                  f"{item.get('subject')}  {item.get('check')}  {str(item.get('summary', ''))[:100]}",
                  file=stream, flush=True)
        return True

    return handle


RUNNER_PREFIX = "clustereval-runner-"
RUNNER_OWNER = "owner.pid"


def sweep_runner_dirs(tmp: str | os.PathLike[str] | None = None) -> list[Path]:
    """Remove ansible-runner private folders of earlier runs whose process is gone (killed before its own clean-up:
    SIGKILL, a power cut). They hold the run's extra vars and the controller's environment in clear."""
    removed = []
    for folder in Path(tmp or tempfile.gettempdir()).glob(f"{RUNNER_PREFIX}*"):
        owner = folder / RUNNER_OWNER
        if folder.is_dir() and not folder.is_symlink() and owner.is_file() and not runinfo.marker_alive(owner):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def _private_dir() -> str:
    """A fresh private folder (0700) for ansible-runner, marked with this process so a later run can remove it
    should this one be killed before its ``finally``."""
    sweep_runner_dirs()
    private = tempfile.mkdtemp(prefix=RUNNER_PREFIX)
    runinfo.mark_active(Path(private) / RUNNER_OWNER)
    return private


def evaluate(inventory: str, *, phases: list[str] | None = None, out: str | None = None,
             extravars: dict[str, Any] | None = None, extra_files: list[str] | None = None,
             tags: str | None = None, skip_tags: str | None = None,
             limit: str | None = None, verbosity: int = 0, stream=sys.stderr,
             playbook: str = "evaluate.yml") -> tuple[int, Path]:
    """Run the evaluation; returns (ansible exit status, run directory)."""
    import ansible_runner

    root = project_root()
    run_dir = Path(out).resolve() if out else Path(default_run_dir(root / "playbooks"))
    inventory_path = Path(inventory).resolve()
    if not inventory_path.exists():
        raise FileNotFoundError(f"inventory {inventory} does not exist")
    variables = dict(extravars or {})
    variables["clustereval_out"] = str(run_dir)
    if phases:
        variables["clustereval_phases"] = ",".join(phases)
    env = {
        **ansible_env(root),
        "CLUSTEREVAL_ENTRY_POINT": "clustereval",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "ANSIBLE_FORCE_COLOR": "0",
    }
    private = _private_dir()
    # SSH master connections of this run only, closed with it (an earlier run's would answer for a node
    # whose sshd has died; a kept one would outlive an interrupted run).
    control_dir = _control_dir(private)
    env["ANSIBLE_SSH_CONTROL_PATH_DIR"] = str(control_dir)
    control = run_control.RunControl(stream)
    try:
        cmdline = []
        if tags:
            cmdline += ["--tags", tags]
        if skip_tags:
            cmdline += ["--skip-tags", skip_tags]
        for path in extra_files or []:
            cmdline += ["-e", f"@{path}"]
        with control:
            result = ansible_runner.run(
                private_data_dir=private,
                project_dir=str(root / "playbooks"),
                playbook=str(root / "playbooks" / playbook),
                inventory=str(inventory_path),
                extravars=variables,
                envvars=env,
                limit=limit,
                verbosity=verbosity,
                cmdline=shlex.join(cmdline) or None,
                quiet=True,
                event_handler=_progress_printer(stream),
                cancel_callback=control.cancel,
                settings={"pexpect_timeout": 0.5},
            )
            forced = control.finish(run_dir, control_dir)
        rc = result.rc if result.rc is not None else 1
        if control.interrupted:
            rc = INTERRUPTED_RC.get(control.signal_name or "", 1)
            _record_interruption(run_dir, control.interrupted, forced, stream)
        elif result.status not in ("successful", "failed"):
            print(f"ansible-runner status: {result.status}", file=stream)
            tail = result.stdout.read()[-4000:] if result.stdout else ""
            if tail:
                print(tail, file=stream)
        elif rc != 0 and not (run_dir / "results.jsonl").exists():
            print((result.stdout.read() if result.stdout else "")[-4000:], file=stream)
    finally:
        shutil.rmtree(private, ignore_errors=True)
        shutil.rmtree(control_dir, ignore_errors=True)
    return rc, run_dir


# A socket path holds at most 107 bytes; ssh adds the 40-character connection hash and, while it creates the
# socket, a 17-character suffix.
CONTROL_DIR_MAX = 107 - 41 - 18
SHORT_TMP = "/tmp"


def _control_dir(private: str) -> Path:
    """The folder of this run's SSH master sockets: in the private folder, or, where that path is too long for
    a socket (a deep $TMPDIR), a private folder of its own under /tmp."""
    folder = Path(private) / "cp"
    if len(str(folder)) > CONTROL_DIR_MAX:
        folder = Path(tempfile.mkdtemp(prefix="ce-cp-", dir=SHORT_TMP))
    else:
        folder.mkdir(mode=0o700)
    return folder


def _record_interruption(run_dir: Path, how: str, forced: list[int], stream) -> None:
    """Say in run.json by what and when the run was interrupted, and re-write the reports with it."""
    if not (run_dir / "run.json").exists():
        print(f"clustereval: the run was interrupted ({how}) before its run directory was made", file=stream)
        return
    detail = f"{how}; the processes it had started were stopped" + (
        f" ({len(forced)} of them by force)" if forced else "")
    runinfo.mark_ended(run_dir, interrupted=detail)
    from clustereval import report

    with contextlib.suppress(Exception):  # the results are on disk; `clustereval report DIR` can retry
        report.render_all(run_dir)


def load_score(run_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads((Path(run_dir) / "score.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
