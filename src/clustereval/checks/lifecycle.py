"""Lifecycle checks: what a researcher waits for every day, timed for real on the node (role lifecycle).

Installs and imports are measured on every storage tier a user writes to (the role's
``clustereval_lifecycle_tiers``: home, scratch, configured directories), one result per tier and variant
(params ``tier`` and ``installer`` / ``cache``); WAN speed per endpoint, a container pull, model downloads and
an inference server's start on the hosts the role samples. The probes (``checks/probes/lifecycle.yml``) print
one record per line (parser ``probe-lifecycle``); the expected values are in ``baselines/lifecycle.yml``,
matched on the result's params. Whatever the probe could not measure (no uv, an unreachable endpoint, no
vLLM, the page cache not dropped) is a ``skip`` saying why; a required endpoint that cannot be reached is a
``fail``; output the harness cannot read is an ``error``.
"""

from __future__ import annotations

import re
import statistics
from typing import Any

from clustereval import baselines, parsers, redact
from clustereval.checks import Context, HarnessError, Skip, Verdict, check

AREA = "lifecycle"
INSTALL, IMPORT, WAN, PULL, MODEL, SERVE = ("lifecycle_install", "lifecycle_import_torch", "lifecycle_wan",
                                            "lifecycle_pull", "lifecycle_model", "lifecycle_serve")
PARSER = "probe-lifecycle"
INSTALLERS = ("pip", "uv")
# What curl, enroot, Apptainer and Docker say when the far end cannot be reached at all.
UNREACHABLE = re.compile(r"resolve host|no such host|name or service not known|temporary failure in name resolution|"
                         r"failed to connect|couldn't connect|connection refused|connection timed out|timed out|"
                         r"i/o timeout|network is unreachable|no route to host|ssl connect error|could not connect",
                         re.I)
# A transfer smaller than this says more about latency than about a rate.
MIN_RATE_BYTES = 1_000_000
TIMEOUT_RC = 124


def _output(ctx: Context, name: str) -> tuple[list[dict[str, Any]], bool]:
    """The probe's records and whether its output is whole; what the harness could not run or read raises."""
    probe = ctx.raw(name)  # not collected or timed out: HarnessError
    if probe.get("missing"):
        raise Skip(f"`{probe.get('tool')}` is not installed on {ctx.subject}")
    if name in ctx.parse_cache:
        data = ctx.parse_cache[name]
    else:
        try:
            data = parsers.parse(PARSER, probe.get("stdout") or "")
        except parsers.ParseError as exc:
            tail = (probe.get("stderr") or "").strip().splitlines()[-1:] or ["no error output"]
            raise HarnessError(f"the {name} probe printed nothing readable (exit {probe.get('rc')}): {exc}; "
                               f"{redact.redact(tail[0][:300])}") from None
        ctx.parse_cache[name] = data
    records = data["records"]
    ends = [r for r in records if r["record"] == "end"]
    if ends and ends[-1].get("state") == "error":
        raise HarnessError(f"the {name} probe could not run: {ends[-1].get('reason') or 'no reason given'}")
    if probe.get("rc") not in (0, None):
        tail = (probe.get("stderr") or "").strip().splitlines()[-1:] or ["no error output"]
        raise HarnessError(f"the {name} probe exited with status {probe.get('rc')}: {redact.redact(tail[0][:300])}")
    return records, bool(data["complete"])


def _find(records: list[dict[str, Any]], what: str, /, **match: Any) -> list[dict[str, Any]]:
    """The ``what`` records (tier, install, ...) whose fields have the given values."""
    return [r for r in records if r["record"] == what and all(r.get(k) == v for k, v in match.items())]


def _seconds(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise HarnessError(f"{what}: no time in the probe's record ({value!r})")
    return round(float(value), 3)


def _limit(ctx: Context, check_id: str, params: dict[str, Any]) -> baselines.Limit:
    try:
        return baselines.reference(AREA, check_id, ctx.facts, params, ctx.options.get("baseline_overrides"))
    except baselines.NoReference as exc:
        raise Skip(str(exc)) from None


def _graded(ctx: Context, check_id: str, params: dict[str, Any], value: float, unit: str, said: str,
            evidence: dict[str, Any]) -> Verdict:
    """``said`` (what was measured, one clause) judged against the expected value for ``params``; with none
    known, a skip saying what was measured and what was looked for."""
    try:
        lim = _limit(ctx, check_id, params)
    except Skip as exc:
        return Verdict("skip", f"{said}; {exc}", round(value, 3 if unit == "s" else 1), unit, evidence=evidence,
                       params=params)
    status = baselines.grade(value, lim)
    side = "above" if lim.direction == "lower" else "below"
    summary = {"pass": said,
               "warn": f"{said}, {side} the expected {lim.warn:g} {unit}",
               "fail": f"{said}, {side} the failure level {lim.fail:g} {unit}"}[status]
    return Verdict(status, summary, round(value, 3 if unit == "s" else 1), unit, lim.expected(), evidence,
                   params=params)


def _verdict(status: str, summary: str, params: dict[str, Any], evidence: dict[str, Any] | None = None,
             value: Any = None, unit: str | None = None) -> Verdict:
    return Verdict(status, summary, value, unit, evidence=evidence or {}, params=params)


def _unmeasured(what: str, ctx: Context, complete: bool, params: dict[str, Any] | None = None,
                evidence: dict[str, Any] | None = None, verb: str = "measured") -> Verdict:
    """The harness's error for a record the probe never printed: cut short, or not there at all."""
    why = "the probe's output ends before it" if not complete else "the probe printed no record of it"
    return Verdict("error", f"{what} was not {verb} on {ctx.subject}: {why}", evidence=evidence or {},
                   params=params or {})


def _tiers(ctx: Context, records: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The tiers the role asked for (``options.tiers``, in order), else those the probe reported."""
    given = ctx.options.get("tiers")
    if given:
        return [{"name": str(t.get("name")), "path": str(t.get("path") or "")} for t in given]
    names = list(dict.fromkeys(str(r.get("name")) for r in _find(records, "tier")))
    return [{"name": n, "path": ""} for n in names]


def _tier_problem(ctx: Context, records: list[dict[str, Any]], complete: bool, tier: dict[str, str],
                  probe: str) -> tuple[Verdict | None, dict[str, Any]]:
    """(a verdict every variant of the tier gets when it could not be measured at all, the tier's facts)."""
    name, path = tier["name"], tier["path"]
    found = _find(records, "tier", name=name)
    where = f"{name} ({path})" if path else name
    if not found:
        return _unmeasured(f"tier {where}", ctx, complete), {}
    rec = found[-1]
    facts = {"tier": name, "path": path, "fstype": rec.get("fstype"), "source": rec.get("source")}
    if rec.get("state") == "missing":
        return Verdict("skip", f"tier {where} is not on {ctx.subject}: {rec.get('reason') or 'no such directory'}",
                       evidence=facts), facts
    if rec.get("state") == "unwritable":
        return Verdict("fail", f"cannot write to tier {where} on {ctx.subject}: {rec.get('reason')}",
                       evidence=facts), facts
    return None, facts


def _with_params(verdict: Verdict, params: dict[str, Any]) -> Verdict:
    return Verdict(verdict.status, verdict.summary, verdict.value, verdict.unit, verdict.expected,
                   dict(verdict.evidence), params=params)


def _duration(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds >= 1 else f"{seconds:.3f} s"


def _size(count: int) -> str:
    """Bytes as a person reads them: 45 MB, 1.2 GB, 350 kB."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.{1 if count < 10 * scale else 0}f} {unit}"
    return f"{count} bytes"


def _on(facts: dict[str, Any]) -> str:
    fstype = facts.get("fstype")
    return f"{facts.get('tier')} ({fstype})" if fstype and fstype != "unknown" else str(facts.get("tier"))


# ------------------------------------------------------------------------------------------------ installs

def _sources(ctx: Context) -> str:
    given = [f"index {redact.redact(ctx.options['index_url'])}" if ctx.options.get("index_url") else "",
             f"wheels in {ctx.options['wheel_dir']}" if ctx.options.get("wheel_dir") else "",
             "no index" if ctx.options.get("no_index") else ""]
    return ", ".join(s for s in given if s) or "pip's own configuration"


@check("lifecycle.install.packages")
def install_packages(ctx: Context) -> list[Verdict]:
    records, complete = _output(ctx, INSTALL)
    packages = list(ctx.options.get("packages") or [])
    out = []
    for tier in _tiers(ctx, records):
        problem, facts = _tier_problem(ctx, records, complete, tier, INSTALL)
        for installer in INSTALLERS:
            params = {**ctx.params, "tier": tier["name"], "installer": installer}
            if problem is not None:
                out.append(_with_params(problem, params))
                continue
            out.append(_install(ctx, records, complete, facts, installer, params, packages))
    return out


def _install(ctx: Context, records: list[dict[str, Any]], complete: bool, facts: dict[str, Any], installer: str,
             params: dict[str, Any], packages: list[str]) -> Verdict:
    found = _find(records, "install", tier=facts["tier"], installer=installer)
    on = _on(facts)
    if not found:
        return _unmeasured(f"{installer} on {on}", ctx, complete, params, facts)
    rec = found[-1]
    evidence = {**facts, "installer": installer, "packages": packages, "sources": _sources(ctx),
                "venv_s": rec.get("venv_s"), "install_s": rec.get("install_s"), "installed": rec.get("installed")}
    if rec.get("state") == "skipped":
        return _verdict("skip", f"{installer} not measured on {ctx.subject}: {rec.get('reason')}", params, evidence)
    rc = rec.get("rc")
    step = "the venv" if rec.get("stage") == "venv" else f"{installer} install"
    if rc == TIMEOUT_RC:
        limit = ctx.options.get("install_timeout_s")
        return _verdict("fail", f"{step} on {on} did not finish within {limit or 'the time limit'} s", params, evidence)
    if rc != 0:
        what = (f"creating a venv on {on} failed" if rec.get("stage") == "venv"
                else f"{installer} install into a fresh venv on {on} failed after {rec.get('install_s')} s")
        return _verdict("fail", f"{what}: {rec.get('reason') or f'exit status {rc}'}", params, evidence)
    seconds = _seconds(rec.get("install_s"), f"{installer} on {on}")
    count = rec.get("installed")
    what = (f"{count} package{'s' if count != 1 else ''}" if isinstance(count, int) and count
            else "the package set")
    venv = rec.get("venv_s")
    made = f" (venv made in {venv:.1f} s)" if isinstance(venv, int | float) else ""
    said = f"{installer} installed {what} into a fresh venv on {on} in {_duration(seconds)} with an empty cache{made}"
    return _graded(ctx, "lifecycle.install.packages", params, seconds, "s", said, evidence)


# ------------------------------------------------------------------------------------------------ import torch

@check("lifecycle.import.torch")
def import_torch(ctx: Context) -> list[Verdict]:
    records, complete = _output(ctx, IMPORT)
    whole = _find(records, "import", state="skipped")
    whole = [r for r in whole if "tier" not in r]
    actions = (_find(records, "actions") or [{}])[-1]
    out = []
    for tier in _tiers(ctx, records):
        problem, facts = _tier_problem(ctx, records, complete, tier, IMPORT) if not whole else (None, {})
        for cache in ("cold", "warm"):
            params = {**ctx.params, "tier": tier["name"], "cache": cache}
            if whole:
                out.append(_verdict("skip", f"import torch not timed on {ctx.subject}: {whole[-1].get('reason')}",
                                    params))
            elif problem is not None:
                out.append(_with_params(problem, params))
            else:
                out.append(_import(ctx, records, complete, facts, cache, params, actions))
    return out


def _import(ctx: Context, records: list[dict[str, Any]], complete: bool, facts: dict[str, Any], cache: str,
            params: dict[str, Any], actions: dict[str, Any]) -> Verdict:
    name, on = facts["tier"], _on(facts)
    mine = [r for r in _find(records, "import", tier=name)]
    copy = next((r for r in mine if r.get("stage") == "copy"), None)
    first = next((r for r in mine if r.get("phase") == "first"), None)
    evidence: dict[str, Any] = {**facts, "torch_venv": ctx.options.get("torch_venv"),
                                "page_cache_dropping_allowed": actions.get("allowed") == "1"}
    if copy is not None:
        evidence.update(torch=copy.get("version"), copy_s=copy.get("copy_s"), copied_bytes=copy.get("bytes"),
                        copied_files=copy.get("files"))
    if copy is None or (copy.get("rc") == 0 and first is None):
        return _unmeasured(f"import torch on {on}", ctx, complete, params, evidence)
    if copy.get("rc") != 0:
        return _verdict("fail", f"could not put a PyTorch environment on {on}: {copy.get('reason')}", params, evidence)
    evidence["first_import_s"] = first.get("import_s") if first else None
    if first and first.get("rc") != 0:
        return _verdict("fail", f"import torch fails from the environment on {on}: {_import_failure(ctx, first)}",
                        params, evidence)
    version = copy.get("version") or "torch"
    if cache == "cold":
        cold = next((r for r in mine if r.get("phase") == "cold"), None)
        if cold is None:
            return _verdict("error", f"cold import torch on {on} was not measured on {ctx.subject}: the probe "
                                     f"printed no record of it", params, evidence)
        if cold.get("state") == "skipped":
            took = first.get("import_s")
            took = _duration(float(took)) if isinstance(took, int | float) else "an unknown time"
            return _verdict("skip", f"cold import not measured on {on}, warm only: {cold.get('reason')}; the first "
                                    f"import after copying took {took}, its files still in the page cache", params,
                            evidence)
        if cold.get("rc") != 0:
            return _verdict("fail", f"cold import torch fails on {on}: {_import_failure(ctx, cold)}", params, evidence)
        seconds = _seconds(cold.get("import_s"), f"cold import on {on}")
        said = (f"import torch {version} takes {_duration(seconds)} cold (page cache dropped) from an environment "
                f"on {on}")
        return _graded(ctx, "lifecycle.import.torch", params, seconds, "s", said, evidence)
    warm = [r for r in mine if r.get("phase") == "warm"]
    if not warm:
        why = "the probe's output ends before them" if not complete else "the probe printed none"
        return _verdict("error", f"warm imports on {on} were not measured on {ctx.subject}: {why}", params, evidence)
    failed = [r for r in warm if r.get("rc") != 0]
    if failed:
        return _verdict("fail", f"import torch fails on {on} on repeat {failed[0].get('repeat')}: "
                                f"{_import_failure(ctx, failed[0])}", params, evidence)
    times = [_seconds(r.get("import_s"), f"warm import on {on}") for r in warm]
    seconds = round(statistics.median(times), 3)
    evidence["warm_s"] = times
    cold = next((r for r in mine if r.get("phase") == "cold"), {})
    only = "" if cold.get("import_s") is not None else "; warm only, the page cache was not dropped"
    said = (f"import torch {version} takes {_duration(seconds)} warm (median of {len(times)}) from an environment "
            f"on {on}{only}")
    return _graded(ctx, "lifecycle.import.torch", params, seconds, "s", said, evidence)


def _import_failure(ctx: Context, rec: dict[str, Any]) -> str:
    if rec.get("rc") == TIMEOUT_RC:
        return f"it did not finish within {ctx.options.get('import_timeout_s') or 'the time limit'} s"
    return str(rec.get("reason") or f"exit status {rec.get('rc')}")


# ------------------------------------------------------------------------------------------------ WAN

def _unreachable(ctx: Context, what: str, reason: str, required: bool, params: dict[str, Any],
                 evidence: dict[str, Any]) -> Verdict:
    if required:
        return _verdict("fail", f"{what} cannot be reached from {ctx.subject} and is required: {reason}", params,
                        evidence)
    return _verdict("skip", f"{what} unreachable from {ctx.subject} (not required): {reason}", params, evidence)


@check("lifecycle.wan.transfer")
def wan_transfer(ctx: Context) -> list[Verdict]:
    if ctx.options.get("endpoints") == []:
        raise Skip("no WAN endpoint is configured (clustereval_lifecycle_endpoints is empty)")
    records, complete = _output(ctx, WAN)
    given = ctx.options.get("endpoints") or [{"name": r.get("name"), "kind": r.get("kind")}
                                            for r in _find(records, "wan")]
    out = []
    for endpoint in given:
        name, kind = str(endpoint.get("name")), str(endpoint.get("kind") or "download")
        params = {**ctx.params, "endpoint": name, "direction": kind}
        evidence = {"endpoint": name, "url": redact.redact(str(endpoint.get("url") or "")),
                    "required": bool(endpoint.get("required"))}
        found = _find(records, "wan", name=name, kind=kind)
        if not found:
            out.append(_unmeasured(f"endpoint {name}", ctx, complete, params, evidence))
            continue
        out.append(_transfer(ctx, found[-1], name, kind, bool(endpoint.get("required")), params, evidence))
    return out


def _transfer(ctx: Context, rec: dict[str, Any], name: str, kind: str, required: bool, params: dict[str, Any],
              evidence: dict[str, Any]) -> Verdict:
    moved = rec.get("up_bytes") if kind == "upload" else rec.get("bytes")
    moved = moved if isinstance(moved, int) else 0
    http, rc = rec.get("http"), rec.get("rc")
    evidence.update(http=http, curl_rc=rc, bytes=moved, total_s=rec.get("total_s"), connect_s=rec.get("connect_s"),
                    first_byte_s=rec.get("ttfb_s"))
    reason = rec.get("reason") or f"curl exit status {rc}"
    if moved < MIN_RATE_BYTES and rc != 0:
        return _unreachable(ctx, f"{name} ({kind})", reason, required, params, evidence)
    if isinstance(http, int) and http >= 400:
        said = f"{name} answered HTTP {http} to the {kind}, so nothing was measured"
        if required:
            return _verdict("fail", f"{said}, and the endpoint is required", params, evidence)
        return _verdict("skip", f"{said} (not required)", params, evidence)
    if moved < MIN_RATE_BYTES:
        return _verdict("skip", f"{name} moved only {moved} bytes in the {kind}: too little to measure a rate "
                                f"(give the endpoint a larger file or more bytes)", params, evidence)
    seconds = rec.get("total_s")
    if not isinstance(seconds, int | float) or seconds <= 0:
        raise HarnessError(f"endpoint {name}: curl gave no transfer time ({seconds!r})")
    rate = moved / float(seconds) / 1e6
    cut = " (cut at the transfer time limit)" if rc == 28 else ""
    way = f"upload to {name}" if kind == "upload" else f"download from {name}"
    said = f"{way} at {rate:.1f} MB/s ({_size(moved)} in {_duration(float(seconds))}{cut})"
    return _graded(ctx, "lifecycle.wan.transfer", params, rate, "MB/s", said, evidence)


# ------------------------------------------------------------------------------------------------ container pull

@check("lifecycle.container.pull")
def container_pull(ctx: Context) -> Verdict:
    records, complete = _output(ctx, PULL)
    image = str(ctx.options.get("image") or "")
    params = {**ctx.params, "image": image}
    required = bool(ctx.options.get("container_required"))
    found = _find(records, "pull")
    if not found:
        return _unmeasured(f"the pull of {image}", ctx, complete, params)
    rec = found[-1]
    runtime = rec.get("runtime")
    evidence = {"image": image, "runtime": runtime, "pull_s": rec.get("pull_s"), "bytes": rec.get("bytes"),
                "required": required}
    if rec.get("state") == "skipped":
        return _verdict("skip", f"no pull measured on {ctx.subject}: {rec.get('reason')}", params, evidence)
    if rec.get("state") == "unwritable":
        return _verdict("fail", f"{runtime} cannot write its image on {ctx.subject}: {rec.get('reason')}", params,
                        evidence)
    rc, reason = rec.get("rc"), rec.get("reason") or f"exit status {rec.get('rc')}"
    if rc == TIMEOUT_RC:
        return _verdict("fail", f"{runtime} pull of {image} did not finish within "
                                f"{ctx.options.get('pull_timeout_s') or 'the time limit'} s", params, evidence)
    if rc != 0:
        if UNREACHABLE.search(reason):
            return _unreachable(ctx, f"the registry of {image}", reason, required, params, evidence)
        return _verdict("fail", f"{runtime} pull of {image} failed after {rec.get('pull_s')} s: {reason}", params,
                        evidence)
    seconds = _seconds(rec.get("pull_s"), f"pull of {image}")
    size = rec.get("bytes")
    made = f", a {_size(size)} image" if isinstance(size, int) and size > 0 else ""
    said = f"{runtime} pulled {image} in {_duration(seconds)} with an empty cache{made}"
    return _graded(ctx, "lifecycle.container.pull", params, seconds, "s", said, evidence)


# ------------------------------------------------------------------------------------------------ model downloads

@check("lifecycle.model.download")
def model_download(ctx: Context) -> list[Verdict]:
    if ctx.options.get("models") == []:
        raise Skip("no model is configured (clustereval_lifecycle_models is empty)")
    records, complete = _output(ctx, MODEL)
    given = ctx.options.get("models") or [{"name": r.get("name"), "hub": r.get("hub")} for r in _find(records, "model")]
    out = []
    for model in given:
        name, hub = str(model.get("name")), str(model.get("hub"))
        required = bool(model.get("required"))
        params = {**ctx.params, "model": name, "hub": hub}
        evidence: dict[str, Any] = {"model": name, "hub": hub, "repo": model.get("repo"), "required": required}
        found = _find(records, "model", name=name)
        if not found:
            out.append(_unmeasured(f"model {name}", ctx, complete, params, evidence, verb="downloaded"))
            continue
        out.append(_download(ctx, found[-1], name, hub, required, params, evidence))
    return out


def _download(ctx: Context, rec: dict[str, Any], name: str, hub: str, required: bool, params: dict[str, Any],
              evidence: dict[str, Any]) -> Verdict:
    evidence.update(http=rec.get("http"), curl_rc=rec.get("rc"), files=rec.get("files"), bytes=rec.get("bytes"),
                    download_s=rec.get("download_s"))
    where = {"huggingface": "Hugging Face", "modelscope": "ModelScope"}.get(hub, hub)
    if rec.get("state") == "skipped":
        return _verdict("skip", f"model {name} not downloaded on {ctx.subject}: {rec.get('reason')}", params, evidence)
    if rec.get("state") == "unwritable":
        return _verdict("fail", f"cannot write model {name} on {ctx.subject}: {rec.get('reason')}", params, evidence)
    rc, http = rec.get("rc"), rec.get("http")
    moved = rec.get("bytes") if isinstance(rec.get("bytes"), int) else 0
    if rc != 0 and moved < MIN_RATE_BYTES:
        return _unreachable(ctx, f"{where} ({name})", rec.get("reason") or f"curl exit status {rc}", required,
                            params, evidence)
    if isinstance(http, int) and http >= 400:
        hint = ": the model may be gated (a token is needed) or the file list wrong" if http in (401, 403, 404) else ""
        said = f"{where} answered HTTP {http} for {name}{hint}"
        return _verdict("fail" if required else "skip", said + (", and the model is required" if required
                                                               else " (not required)"), params, evidence)
    if moved < MIN_RATE_BYTES:
        return _verdict("skip", f"model {name} is only {moved} bytes: too little to measure a rate", params, evidence)
    seconds = rec.get("download_s")
    if not isinstance(seconds, int | float) or seconds <= 0:
        raise HarnessError(f"model {name}: no download time in the probe's record ({seconds!r})")
    rate = moved / float(seconds) / 1e6
    cut = " (cut at the download time limit)" if rc == 28 else ""
    said = f"{name} from {where} at {rate:.1f} MB/s ({_size(moved)} in {_duration(float(seconds))}{cut})"
    return _graded(ctx, "lifecycle.model.download", params, rate, "MB/s", said, evidence)


# ------------------------------------------------------------------------------------------------ serve

@check("lifecycle.serve.ready")
def serve_ready(ctx: Context) -> Verdict:
    records, complete = _output(ctx, SERVE)
    engine = str(ctx.options.get("serve_engine") or "vllm")
    params = {**ctx.params, "engine": engine}
    found = _find(records, "serve")
    if not found:
        return _unmeasured(f"{engine} serve", ctx, complete, params)
    rec = found[-1]
    model = ctx.options.get("serve_model")
    evidence = {"engine": engine, "model": model, "ready_s": rec.get("ready_s"), "gpus": rec.get("gpus"),
                "state": rec.get("state")}
    state = rec.get("state")
    if state == "skipped":
        return _verdict("skip", f"{engine} serve not measured on {ctx.subject}: {rec.get('reason')}", params, evidence)
    if state == "exited":
        return _verdict("fail", f"{engine} serve exited after {rec.get('ready_s')} s before /v1/models answered: "
                                f"{rec.get('reason') or 'no output'}", params, evidence)
    if state == "timeout":
        limit = rec.get("timeout_s")
        limit = f"{limit:g}" if isinstance(limit, int | float) else "the time limit"
        return _verdict("fail", f"{engine} serve of {model} did not answer /v1/models within {limit} s: "
                                f"{rec.get('reason') or 'no output'}", params, evidence)
    if state != "ready":
        raise HarnessError(f"the serve probe reported an unknown state {state!r}")
    seconds = _seconds(rec.get("ready_s"), f"{engine} serve")
    said = f"{engine} serve of {model} answered /v1/models {_duration(seconds)} after it started"
    return _graded(ctx, "lifecycle.serve.ready", params, seconds, "s", said, evidence)
