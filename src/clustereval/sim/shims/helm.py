#!/usr/bin/python3
"""Simulated ``helm`` v3.16 for a simulated node (standalone: stdlib only, no clustereval import).

Reads the same API file as the kubectl shim (``$CLUSTEREVAL_SIM_K8S_API``, default
``/etc/clustereval-sim-k8s/api.json``; its ``helm_releases`` and ``denied``) and answers:

* ``version --short``: ``v3.16.3+gcfd0749``;
* ``list [--all-namespaces|-A] [--max N] -o json``: the releases as one compact JSON array and a newline
  (helm's json.Encoder); when the tenant may not list secrets (Helm 3 keeps releases in Secrets) the
  error helm prints, exit 1.

Without the API file it answers like helm with no kubeconfig (``Kubernetes cluster unreachable``).
"""

import json
import os
import sys

API_FILE = "/etc/clustereval-sim-k8s/api.json"
SHORT_VERSION = "v3.16.3+gcfd0749"


def load_api():
    try:
        with open(os.environ.get("CLUSTEREVAL_SIM_K8S_API") or API_FILE) as fh:
            api = json.load(fh)
    except (OSError, ValueError):
        return None
    return api if isinstance(api, dict) and api.get("enabled", True) else None


def cmd_list(api, args):
    limit, output, i = 256, "table", 0
    while i < len(args):
        if args[i] in ("-m", "--max") and i + 1 < len(args):
            limit, i = int(args[i + 1]), i + 1
        elif args[i] in ("-o", "--output") and i + 1 < len(args):
            output, i = args[i + 1], i + 1
        i += 1
    if api is None:
        sys.stderr.write('Error: Kubernetes cluster unreachable: Get "http://localhost:8080/version": dial tcp '
                         "127.0.0.1:8080: connect: connection refused\n")
        return 1
    if "list secrets" in (api.get("denied") or []):
        sys.stderr.write('Error: list: failed to list: secrets is forbidden: User "%s" cannot list resource '
                         '"secrets" in API group "" at the cluster scope\n' % (api.get("user") or "tenant"))
        return 1
    releases = (api.get("helm_releases") or [])[:limit]
    if output == "json":
        sys.stdout.write(json.dumps(releases, separators=(",", ":")) + "\n")
    else:
        sys.stdout.write("NAME\tNAMESPACE\tREVISION\tUPDATED\tSTATUS\tCHART\tAPP VERSION\n")
        for r in releases:
            sys.stdout.write("\t".join(r[k] for k in ("name", "namespace", "revision", "updated", "status", "chart",
                                                       "app_version")) + "\n")
    return 0


def main(argv):
    if argv[:1] == ["version"]:
        if "--short" in argv:
            sys.stdout.write(SHORT_VERSION + "\n")
        else:
            sys.stdout.write('version.BuildInfo{Version:"v3.16.3", '
                             'GitCommit:"cfd07493f46efc9debd9cc1b02a0961186df7fdf", '
                             'GitTreeState:"clean", GoVersion:"go1.22.7"}\n')
        return 0
    if argv[:1] in (["list"], ["ls"]):
        return cmd_list(load_api(), argv[1:])
    sys.stderr.write('Error: unknown command "%s" for "helm"\nRun \'helm --help\' for usage.\n'
                     % (argv[0] if argv else ""))
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
