#!/usr/bin/python3
"""Simulated NVIDIA dcgm-exporter: serves the node's GPU metrics in Prometheus text format.

Usage (as the real one): dcgm-exporter -a <address>:<port>   (default :9400); ``--version`` prints
``dcgm-exporter version <DCGM>-<exporter>`` (profile keys ``dcgm_version``, ``dcgm_exporter_version``).
Metrics come from the node's state file ($SIMNODE_ROOT/node.json or /sim/node.json), named and
labelled as dcgm-exporter 3.x names them:
DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-…",device="nvidia0",modelName="…",Hostname="…"}.
"""

import json
import os
import socket
import sys

FIELDS = [
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", "sm_clock_mhz"),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", "mem_clock_mhz"),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", "temperature_c"),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", "power_draw_w"),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", "utilization_pct"),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", "memory_used_mib"),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", None),
]


def state():
    root = os.environ.get("SIMNODE_ROOT") or "/sim"
    with open(os.path.join(root, "node.json"), encoding="utf-8") as fh:
        return json.load(fh)


def metrics():
    node = state()
    host = socket.gethostname()
    out = []
    for name, kind, text, key in FIELDS:
        out.append(f"# HELP {name} {text}")
        out.append(f"# TYPE {name} {kind}")
        for index, gpu in enumerate(node.get("gpus") or []):
            labels = (f'gpu="{index}",UUID="{gpu.get("uuid", "")}",device="nvidia{index}",'
                      f'modelName="{gpu.get("name", "")}",Hostname="{host}"')
            value = gpu.get(key, 0) if key else 0
            out.append(f"{name}{{{labels}}} {value}")
    return "\n".join(out) + "\n"


def serve(address):
    """Serve /metrics on ``host:port`` until killed (http.server is imported only here: `--version` runs on
    every node in every audit, and that import is most of a short run's cost)."""
    import http.server

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404)
                return
            body = metrics().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    host, _, port = address.rpartition(":")
    http.server.ThreadingHTTPServer((host or "0.0.0.0", int(port)), Handler).serve_forever()


def main(argv):
    if argv[:1] in (["--version"], ["-v"]):
        node = state()
        exporter = node.get("dcgm_exporter_version") or "4.8.2"
        print(f"dcgm-exporter version {node.get('dcgm_version', '4.5.3')}-{exporter}")
        return
    address = ":9400"
    if "-a" in argv:
        address = argv[argv.index("-a") + 1]
    serve(address)


if __name__ == "__main__":
    main(sys.argv[1:])
