#!/usr/bin/python3
"""Simulated AMD Device Metrics Exporter (``amd-metrics-exporter``, github.com/ROCm/device-metrics-exporter):
serves an AMD node's GPU metrics in Prometheus text format.

Usage (as the real one): ``amd-metrics-exporter [-amd-metrics-config FILE]``; it serves ``/metrics`` on the
config's ``ServerPort`` (default 5000) on every address. A simulated node shares the host's network namespace,
so the sim starts it with ``SIMNODE_LISTEN_ADDRESS`` (the node's own address) to bind there instead.
``-version`` prints the version as the real binary's flag does (profile ``amd.metrics_exporter_version``).

Metrics are the documented field names in lower case (``GPU_JUNCTION_TEMPERATURE`` is ``gpu_junction_temperature``;
docs "List of Available Metrics") with a subset of the exporter's labels, sorted as the Prometheus Go client
writes them; the values are the node's idle readings from ``/sim/node.json``'s ``amd`` section. What the audit
reads of an exporter is that it listens (``ss``) under its name (``ps``); a scrape returns these lines.
"""

import os
import socket
import sys

import simnode

FIELDS = [  # (metric, help, device key) of every logical device
    ("gpu_nodes_total", "Number of GPUs in the node", None),
    ("gpu_package_power", "Current socket power in Watts", "power_w"),
    ("gpu_junction_temperature", "Hotspot (aka junction) temperature value in Celsius", "temperature_hotspot_c"),
    ("gpu_memory_temperature", "Memory temperature value in Celsius", "temperature_mem_c"),
    ("gpu_gfx_activity", "Graphics engine usage percentage (0 - 100)", "utilization_pct"),
    ("gpu_used_vram", "Used VRAM in MB", "vram_used_mb"),
    ("gpu_total_vram", "Total VRAM available in MB", "vram_total_mb"),
]


def metrics() -> str:
    amd = simnode.amd_state() or {}
    gpus = amd.get("gpus") or []
    host = socket.gethostname()
    out = []
    for name, text, key in FIELDS:
        out += [f"# HELP {name} {text}", f"# TYPE {name} gauge"]
        if key is None:
            out.append(f'{name}{{hostname="{host}"}} {len(gpus)}')
            continue
        for g in gpus:
            labels = (f'card_model="{g.get("market_name", "")}",card_vendor="AMD",'
                      f'gpu_compute_partition_type="{str(g.get("compute_partition", "")).lower()}",'
                      f'gpu_id="{g["index"]}",gpu_memory_partition_type="{str(g.get("memory_partition", "")).lower()}",'
                      f'gpu_partition_id="{g.get("partition_id", 0)}",hostname="{host}",'
                      f'serial_number="{g.get("serial", "")}"')
            out.append(f"{name}{{{labels}}} {g.get(key, 0)}")
    return "\n".join(out) + "\n"


def serve(host: str, port: int) -> None:
    import http.server  # only when serving: -version stays a short run

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

    http.server.ThreadingHTTPServer((host, port), Handler).serve_forever()


def main(argv):
    if argv[:1] in (["-version"], ["--version"]):
        amd = simnode.amd_state() or {}
        print(f"Version : {amd.get('metrics_exporter_version', 'v1.3.1')}")
        return 0
    port = 5000
    if "-amd-metrics-config" in argv:
        config = simnode.read_json(argv[argv.index("-amd-metrics-config") + 1], {})
        port = int(config.get("ServerPort") or port)
    address = os.environ.get("SIMNODE_LISTEN_ADDRESS") or "0.0.0.0"
    serve(address, port)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
