#!/usr/bin/env python3
"""clustereval's S3 benchmark: one node's share of a concurrency sweep against an S3-compatible endpoint.

Standard library only (the nodes have their distribution's Python 3, 3.6 or later, and nothing else): AWS
Signature Version 4 with hmac/hashlib, http.client with one kept-alive connection per worker, threads, and
forked processes when a node runs more workers than ``threads_per_process``.

Settings come from the environment only (``CLUSTEREVAL_<NAME>``, as every clustereval probe gets its
parameters), the credentials included: they are never in argv, and never printed (every text this program
writes is scrubbed of them). The output is one JSON document on stdout (``parsers/s3bench.py`` reads it).

The sweep: for each concurrency level (1, 2, 4, ... up to ``max_concurrency``, the cluster's total), this
node runs its share of the workers (``node_index`` of ``node_count``) through six phases at fixed times after
``start_at`` (the same epoch on every node, so the nodes' loads overlap): put_large (multipart above
``part_mib``), get_large, put_small, get_small, list, delete. Timed phases start new requests for
``duration_s``; delete removes what the level wrote. Every object is written under
``<prefix><run_id>/<node>/`` and deleted: by the delete phase, then by a sweep of the prefix (which also
aborts unfinished multipart uploads), and by ``--cleanup`` (the probe's clean-up command) if the run was cut
short.

``--endurance``: for ``endurance_s`` this node's share of ``max_concurrency`` workers each run PUT, GET, LIST and
DELETE in turn on objects of ``endurance_kib``; every ``interval_s`` one JSON line (tool
``clustereval-s3bench-endurance``, kind ``interval``) with that interval's statistics per operation, then a
``summary`` line.
"""

import hashlib
import hmac
import http.client
import json
import math
import os
import random
import socket
import ssl
import sys
import threading
import time
import traceback
import xml.etree.ElementTree as ET
from urllib.parse import quote, urlsplit

VERSION = 1
PREFIX = "CLUSTEREVAL_"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
PHASES = ("put_large", "get_large", "put_small", "get_small", "list", "delete")
# Latency histograms: log buckets 2% wide from 1 µs (a percentile read back is within 1% of the sample).
HIST_BASE = 1.02
HIST_FLOOR_S = 1e-6
_HIST_LOG = math.log(HIST_BASE)
LARGE_KEYS_PER_WORKER = 2  # large objects are overwritten in turn: the store holds at most 2 per worker
MAX_ERROR_SAMPLES = 5
READ_CHUNK = 1 << 20
RETRYABLE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


class ConfigError(Exception):
    pass


# ------------------------------------------------------------------------------------------------ settings


def _env(name, default=None):
    value = os.environ.get(PREFIX + name)
    return default if value is None or value == "" else value


def _number(name, default, kind=float, low=None):
    text = _env(name)
    try:
        value = kind(text) if text is not None else default
    except ValueError:
        raise ConfigError(f"{PREFIX}{name}={text!r} is not a number") from None
    if low is not None and value < low:
        raise ConfigError(f"{PREFIX}{name} must be at least {low} (got {value})")
    return value


def _flag(name, default):
    text = _env(name)
    return default if text is None else text.lower() in ("1", "true", "yes", "on")


def levels_up_to(maximum):
    """1, 2, 4, ... and ``maximum`` itself when it is not a power of two."""
    out, level = [], 1
    while level < maximum:
        out.append(level)
        level *= 2
    out.append(maximum)
    return out


def share(level, index, count):
    """This node's workers of ``level`` spread over ``count`` nodes (the first nodes take the remainder)."""
    return level // count + (1 if index < level % count else 0)


class Settings:
    def __init__(self):
        endpoint = _env("ENDPOINT")
        if not endpoint:
            raise ConfigError(f"no endpoint: {PREFIX}ENDPOINT is empty")
        parts = urlsplit(endpoint if "://" in endpoint else "https://" + endpoint)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"the endpoint must be http(s)://host[:port], not {endpoint!r}")
        if parts.username or parts.password:
            raise ConfigError("the endpoint must not carry credentials; they come from the environment")
        self.scheme, self.hostname = parts.scheme, parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.endpoint = f"{parts.scheme}://{parts.netloc}"
        self.base_path = parts.path.rstrip("/")
        self.bucket = _env("BUCKET")
        if not self.bucket:
            raise ConfigError(f"no bucket: {PREFIX}BUCKET is empty")
        self.region = _env("REGION", "us-east-1")
        self.addressing = _env("ADDRESSING", "path")
        if self.addressing not in ("path", "virtual"):
            raise ConfigError(f"addressing must be path or virtual, not {self.addressing!r}")
        self.access_key = _env("ACCESS_KEY", "")
        self.secret_key = _env("SECRET_KEY", "")
        self.session_token = _env("SESSION_TOKEN", "")
        if not self.access_key or not self.secret_key:
            raise ConfigError(f"no credentials: {PREFIX}ACCESS_KEY and {PREFIX}SECRET_KEY must be set")
        self.verify_tls = _flag("VERIFY_TLS", True)
        self.ca_bundle = _env("CA_BUNDLE")
        self.sign_payload = _flag("SIGN_PAYLOAD", False)
        node = _env("NODE") or socket.gethostname()
        run_id = _env("RUN_ID", "run")
        self.prefix = "{}{}/{}/".format(_env("PREFIX", "clustereval/"), run_id, node)
        self.node = node
        self.large_bytes = int(_number("LARGE_MIB", 64.0, low=0.001) * (1 << 20))
        self.part_bytes = max(5 << 20, int(_number("PART_MIB", 8.0, low=5) * (1 << 20)))
        self.small_bytes = int(_number("SMALL_KIB", 4.0, low=0) * 1024)
        self.max_concurrency = _number("MAX_CONCURRENCY", 32, int, low=1)
        self.duration_s = _number("DURATION_S", 10.0, low=0.1)
        self.slack_s = _number("SLACK_S", max(2.0, self.duration_s / 2.0), low=0)
        self.node_index = _number("NODE_INDEX", 0, int, low=0)
        self.node_count = _number("NODE_COUNT", 1, int, low=1)
        if self.node_index >= self.node_count:
            raise ConfigError(f"node_index {self.node_index} is not below node_count {self.node_count}")
        self.threads_per_process = _number("THREADS_PER_PROCESS", 8, int, low=1)
        self.small_max = _number("SMALL_MAX", 2000, int, low=1)
        self.request_timeout_s = _number("REQUEST_TIMEOUT_S", 60.0, low=1)
        self.start_at = _number("START_AT", 0.0)
        # --endurance: mixed operations on objects of ENDURANCE_KIB for ENDURANCE_S, one line per INTERVAL_S.
        self.endurance_s = _number("ENDURANCE_S", 900.0, low=0.1)
        self.interval_s = _number("INTERVAL_S", 30.0, low=0.1)
        self.endurance_bytes = int(_number("ENDURANCE_KIB", 1024.0, low=0) * 1024)
        self.levels = levels_up_to(self.max_concurrency)
        chosen = _env("LEVELS")  # an explicit list instead (benchmarks/object_storage_overhead.py: one at a time)
        if chosen:
            try:
                self.levels = sorted(set(int(level) for level in chosen.split(",") if level.strip()))
            except ValueError:
                raise ConfigError(f"{PREFIX}LEVELS={chosen!r} is not a list of numbers") from None
            if not self.levels or self.levels[0] < 1:
                raise ConfigError(f"{PREFIX}LEVELS must name concurrency levels of at least 1 (got {chosen!r})")
            self.max_concurrency = self.levels[-1]

    def secrets(self):
        return [s for s in (self.secret_key, self.session_token, self.access_key) if s]

    def phase_budget(self):
        return self.duration_s + self.slack_s

    def public(self):
        return {"endpoint": self.endpoint, "bucket": self.bucket, "region": self.region,
                "addressing": self.addressing, "prefix": self.prefix, "node": self.node,
                "node_index": self.node_index, "node_count": self.node_count,
                "large_bytes": self.large_bytes, "part_bytes": self.part_bytes, "small_bytes": self.small_bytes,
                "multipart": self.large_bytes > self.part_bytes, "levels": self.levels,
                "workers": [share(c, self.node_index, self.node_count) for c in self.levels],
                "duration_s": self.duration_s, "slack_s": self.slack_s,
                "threads_per_process": self.threads_per_process, "small_max": self.small_max,
                "sign_payload": self.sign_payload, "verify_tls": self.verify_tls,
                "request_timeout_s": self.request_timeout_s}


class Scrubber:
    """Every text leaving the program goes through here: no credential is ever printed."""

    def __init__(self, secrets):
        # The secrets as they are and as JSON writes them (a quote or backslash in a secret is escaped there).
        forms = set()
        for secret in secrets:
            if secret:
                forms.add(secret)
                forms.add(json.dumps(secret)[1:-1])
        self.secrets = sorted(forms, key=len, reverse=True)

    def __call__(self, text):
        text = str(text)
        for secret in self.secrets:
            text = text.replace(secret, "<redacted>")
        return text


# ------------------------------------------------------------------------------------------------ signing


def _quote(text, safe="-_.~"):
    return quote(text, safe=safe)


class Signer:
    """AWS Signature Version 4 for the s3 service (header authentication)."""

    def __init__(self, access_key, secret_key, session_token, region):
        self._access, self._secret, self._token, self._region = access_key, secret_key, session_token, region
        self._keys = {}
        self._lock = threading.Lock()

    def _key(self, date):
        key = self._keys.get(date)
        if key is None:
            key = hmac.new(("AWS4" + self._secret).encode(), date.encode(), hashlib.sha256).digest()
            for part in (self._region, "s3", "aws4_request"):
                key = hmac.new(key, part.encode(), hashlib.sha256).digest()
            with self._lock:
                self._keys = {date: key}
        return key

    def headers(self, method, host, path, query, payload_hash, extra=None, now=None):
        """The request headers with x-amz-date, x-amz-content-sha256 and Authorization. ``path`` is already
        URI-encoded; ``query`` is a list of (name, value) pairs."""
        amz_date = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
        date = amz_date[:8]
        headers = {"host": host, "x-amz-date": amz_date, "x-amz-content-sha256": payload_hash}
        if self._token:
            headers["x-amz-security-token"] = self._token
        for name, value in (extra or {}).items():
            headers[name.lower()] = str(value)
        names = sorted(headers)
        canonical = "\n".join([
            method, path, canonical_query(query),
            "".join("{}:{}\n".format(n, " ".join(headers[n].strip().split())) for n in names),
            ";".join(names), payload_hash])
        scope = f"{date}/{self._region}/s3/aws4_request"
        to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                             hashlib.sha256(canonical.encode()).hexdigest()])
        signature = hmac.new(self._key(date), to_sign.encode(), hashlib.sha256).hexdigest()
        headers["authorization"] = "AWS4-HMAC-SHA256 Credential={}/{}, SignedHeaders={}, Signature={}".format(
            self._access, scope, ";".join(names), signature)
        return headers


def canonical_query(query):
    return "&".join(f"{_quote(k)}={_quote(v)}" for k, v in sorted(query))


# ------------------------------------------------------------------------------------------------ HTTP


class Response:
    __slots__ = ("body", "headers", "nbytes", "status", "total_s", "ttfb_s")

    def __init__(self, status, headers, body, nbytes, ttfb_s, total_s):
        self.status, self.headers, self.body = status, headers, body
        self.nbytes, self.ttfb_s, self.total_s = nbytes, ttfb_s, total_s


class Client:
    """One worker's connection to the endpoint (kept alive; re-opened after an error)."""

    def __init__(self, settings, signer):
        self.s = settings
        self.signer = signer
        self.conn = None
        self.used = 0
        self.reconnects = 0
        self.sink = bytearray(READ_CHUNK)
        if settings.addressing == "virtual":
            self.host = f"{settings.bucket}.{settings.hostname}"
            self.path_base = settings.base_path
        else:
            self.host = settings.hostname
            self.path_base = "{}/{}".format(settings.base_path, _quote(settings.bucket, safe="-_.~"))
        default = 443 if settings.scheme == "https" else 80
        self.host_header = self.host if settings.port == default else f"{self.host}:{settings.port}"
        self.context = None
        if settings.scheme == "https":
            self.context = ssl.create_default_context(cafile=settings.ca_bundle)
            if not settings.verify_tls:
                self.context.check_hostname = False
                self.context.verify_mode = ssl.CERT_NONE

    def _connect(self):
        if self.s.scheme == "https":
            conn = http.client.HTTPSConnection(self.host, self.s.port, timeout=self.s.request_timeout_s,
                                               context=self.context)
        else:
            conn = http.client.HTTPConnection(self.host, self.s.port, timeout=self.s.request_timeout_s)
        conn.connect()
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.conn, self.used = conn, 0

    def close(self):
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:
                pass
        self.conn = None

    def request(self, method, key=None, query=(), body=None, headers=None, keep_body=True):
        """One signed request; the response body is kept (``keep_body``) or only counted. Raises OSError /
        http.client.HTTPException on a network failure (after one retry on a stale kept-alive connection)."""
        # A key, or the bucket itself: /bucket (path style) or / (virtual-hosted style).
        path = self.path_base + "/" + _quote(key, safe="/-_.~") if key is not None else self.path_base or "/"
        query = list(query)
        target = path + ("?" + canonical_query(query) if query else "")
        if body is None:
            payload_hash = EMPTY_SHA256
        elif self.s.sign_payload:
            payload_hash = hashlib.sha256(body).hexdigest()
        else:
            payload_hash = "UNSIGNED-PAYLOAD"
        for attempt in (0, 1):
            fresh = self.conn is None
            signed = self.signer.headers(method, self.host_header, path, query, payload_hash, headers)
            if body is not None:
                signed["content-length"] = str(len(body))
            started = time.perf_counter()
            try:
                if self.conn is None:
                    self._connect()
                self.conn.request(method, target, body=body, headers=signed)
                resp = self.conn.getresponse()
                first = time.perf_counter()
                data, nbytes = self._read(resp, keep_body or resp.status >= 300)
            except RETRYABLE:
                self.close()
                if attempt == 0 and not fresh:
                    self.reconnects += 1
                    continue  # the server closed an idle kept-alive connection: once more on a new one
                raise
            except (OSError, http.client.HTTPException):
                self.close()
                raise
            self.used += 1
            if resp.will_close:
                self.close()
            return Response(resp.status, dict((k.lower(), v) for k, v in resp.getheaders()), data, nbytes,
                            first - started, time.perf_counter() - started)

    def _read(self, resp, keep):
        if keep:
            data = resp.read()
            return data, len(data)
        view, total = memoryview(self.sink), 0
        while True:
            count = resp.readinto(view)
            if not count:
                break
            total += count
        return b"", total


def xml_text(body, name):
    """Every text of elements called ``name`` (namespaces ignored)."""
    try:
        root = ET.fromstring(body)
    except ET.ParseError:
        return []
    return [el.text or "" for el in root.iter() if el.tag.rsplit("}", 1)[-1] == name]


def error_of(resp):
    """(code, message) of an S3 error response."""
    codes = xml_text(resp.body, "Code") if resp.body else []
    messages = xml_text(resp.body, "Message") if resp.body else []
    return (codes[0] if codes else f"HTTP{resp.status}"), (messages[0][:200] if messages else "")


# ------------------------------------------------------------------------------------------------ statistics


def hist_add(hist, seconds):
    index = "0" if seconds <= HIST_FLOOR_S else str(int(math.log(seconds / HIST_FLOOR_S) / _HIST_LOG))
    buckets = hist["buckets"]
    buckets[index] = buckets.get(index, 0) + 1
    hist["count"] += 1
    hist["sum_s"] += seconds
    if hist["min_s"] is None or seconds < hist["min_s"]:
        hist["min_s"] = seconds
    if hist["max_s"] is None or seconds > hist["max_s"]:
        hist["max_s"] = seconds


def new_hist():
    return {"count": 0, "sum_s": 0.0, "min_s": None, "max_s": None, "buckets": {}}


def merge_hist(into, other):
    for index, count in other["buckets"].items():  # keyed by the bucket number as text (as JSON keeps it)
        into["buckets"][index] = into["buckets"].get(index, 0) + count
    into["count"] += other["count"]
    into["sum_s"] += other["sum_s"]
    for key, pick in (("min_s", min), ("max_s", max)):
        values = [v for v in (into[key], other[key]) if v is not None]
        into[key] = pick(values) if values else None


class Stats:
    """What one worker measured in one phase."""

    def __init__(self):
        self.ops = 0
        self.bytes = 0
        self.items = 0  # keys listed by list, parts by put_large
        self.first_start = None
        self.last_end = None
        self.latency = new_hist()
        self.ttfb = new_hist()
        self.errors = {"requests": 0, "failed": 0, "throttled": 0, "server": 0, "client": 0, "network": 0,
                       "short_reads": 0, "samples": []}

    def request_done(self):
        self.errors["requests"] += 1

    def error(self, kind, sample):
        self.errors["failed"] += 1
        self.errors[kind] += 1
        if len(self.errors["samples"]) < MAX_ERROR_SAMPLES:
            self.errors["samples"].append(sample)

    def as_dict(self):
        return {"ops": self.ops, "bytes": self.bytes, "items": self.items, "started": self.first_start,
                "ended": self.last_end, "latency": self.latency, "ttfb": self.ttfb, "errors": self.errors}


def classify(resp):
    """The error kind of a failed response: throttled (503 SlowDown, 429), server (other 5xx), client (4xx)."""
    code, _ = error_of(resp)
    if resp.status == 429 or (resp.status == 503 and code in ("SlowDown", "RequestLimitExceeded", "HTTP503",
                                                              "TooManyRequests", "Throttling")):
        return "throttled"
    return "server" if resp.status >= 500 else "client"


def merge_phase(into, other):
    if into is None:
        return json.loads(json.dumps(other))
    into["ops"] += other["ops"]
    into["bytes"] += other["bytes"]
    into["items"] += other["items"]
    for key, pick in (("started", min), ("ended", max)):
        values = [v for v in (into[key], other[key]) if v is not None]
        into[key] = pick(values) if values else None
    merge_hist(into["latency"], other["latency"])
    merge_hist(into["ttfb"], other["ttfb"])
    for key, value in other["errors"].items():
        if key == "samples":
            into["errors"]["samples"] = (into["errors"]["samples"] + value)[:MAX_ERROR_SAMPLES]
        else:
            into["errors"][key] += value
    return into


# ------------------------------------------------------------------------------------------------ workers


class Worker:
    """One of the level's concurrent clients: its connection, the keys it wrote, its phases' statistics."""

    def __init__(self, settings, signer, pool, scrub, level, wid):
        self.s, self.pool, self.scrub = settings, pool, scrub
        self.client = Client(settings, signer)
        self.base = f"{settings.prefix}c{level}/w{wid}/"
        self.large_keys = []
        self.small_keys = []
        self.rng = random.Random(hash((settings.node, level, wid, time.time())))
        self.stats = None

    # -- one request, accounted
    def call(self, op, method, key=None, query=(), body=None, headers=None, keep_body=True, expect=(200,)):
        st = self.stats
        st.request_done()
        try:
            resp = self.client.request(method, key, query, body, headers, keep_body)
        except (OSError, http.client.HTTPException) as exc:
            st.error("network", {"op": op, "error": self.scrub(f"{type(exc).__name__}: {exc}")[:200]})
            return None
        if resp.status not in expect:
            code, message = error_of(resp)
            st.error(classify(resp), {"op": op, "status": resp.status, "code": self.scrub(code)[:60],
                                      "message": self.scrub(message)})
            return None
        return resp

    def body(self, size):
        """``size`` bytes of random data: a window of the shared random pool at a random offset."""
        offset = self.rng.randrange(0, len(self.pool) - size + 1)
        return self.pool[offset:offset + size]

    def timed(self, op_started, op_ok, nbytes=0, ttfb=None):
        st, now = self.stats, time.time()
        if st.first_start is None:
            st.first_start = op_started
        st.last_end = now
        if op_ok:
            st.ops += 1
            st.bytes += nbytes
            hist_add(st.latency, max(0.0, time.perf_counter() - self._perf))
            if ttfb is not None:
                hist_add(st.ttfb, ttfb)

    def _begin(self):
        self._perf = time.perf_counter()
        return time.time()

    # -- phases
    def put_large(self, deadline):
        n = 0
        while time.time() < deadline:
            key = f"{self.base}L{n % LARGE_KEYS_PER_WORKER}"
            started = self._begin()
            ok = self._upload(key)
            self.timed(started, ok, self.s.large_bytes if ok else 0)
            if ok and key not in self.large_keys:
                self.large_keys.append(key)
            n += 1

    def _upload(self, key):
        size, part = self.s.large_bytes, self.s.part_bytes
        if size <= part:
            return self.call("put_large", "PUT", key, body=self.body(size)) is not None
        resp = self.call("put_large", "POST", key, query=[("uploads", "")])
        upload_ids = xml_text(resp.body, "UploadId") if resp is not None else []
        if not upload_ids:
            return False
        upload_id, etags, offset, number = upload_ids[0], [], 0, 1
        while offset < size:
            length = min(part, size - offset)
            resp = self.call("put_large", "PUT", key, query=[("partNumber", str(number)), ("uploadId", upload_id)],
                             body=self.body(length))
            if resp is None:
                self.call("put_large", "DELETE", key, query=[("uploadId", upload_id)], expect=(200, 204))
                return False
            etags.append(resp.headers.get("etag", ""))
            self.stats.items += 1
            offset += length
            number += 1
        xml = "<CompleteMultipartUpload>{}</CompleteMultipartUpload>".format("".join(
            f"<Part><PartNumber>{i + 1}</PartNumber><ETag>{etag}</ETag></Part>" for i, etag in enumerate(etags)))
        resp = self.call("put_large", "POST", key, query=[("uploadId", upload_id)], body=xml.encode())
        if resp is not None and xml_text(resp.body, "Code"):  # an error inside a 200 answer
            code = xml_text(resp.body, "Code")[0]
            self.stats.error("server", {"op": "put_large", "status": 200, "code": self.scrub(code)[:60],
                                        "message": "CompleteMultipartUpload failed"})
            resp = None
        if resp is None:
            self.call("put_large", "DELETE", key, query=[("uploadId", upload_id)], expect=(200, 204))
            return False
        return True

    def get_large(self, deadline, keys):
        self._get(deadline, keys, "get_large", self.s.large_bytes)

    def get_small(self, deadline, keys):
        self._get(deadline, keys, "get_small", self.s.small_bytes)

    def _get(self, deadline, keys, op, size):
        if not keys:
            return
        n = self.rng.randrange(len(keys))
        while time.time() < deadline:
            key = keys[n % len(keys)]
            started = self._begin()
            resp = self.call(op, "GET", key, keep_body=False)
            ok = resp is not None
            if ok and resp.nbytes != size:
                self.stats.error("short_reads", {"op": op, "status": resp.status, "code": "ShortRead",
                                                 "message": f"{resp.nbytes} of {size} bytes"})
                ok = False
            self.timed(started, ok, resp.nbytes if ok else 0, resp.ttfb_s if ok else None)
            n += 1

    def put_small(self, deadline, cap):
        n = 0
        while time.time() < deadline and n < cap:
            key = f"{self.base}S{n:06d}"
            started = self._begin()
            ok = self.call("put_small", "PUT", key, body=bytes(self.body(self.s.small_bytes))) is not None
            self.timed(started, ok, self.s.small_bytes if ok else 0)
            if ok:
                self.small_keys.append(key)
            n += 1

    def list_keys(self, deadline, prefix):
        while time.time() < deadline:
            token = None
            while True:  # one listing: every page of the level's prefix (each page one timed request)
                query = [("list-type", "2"), ("prefix", prefix), ("max-keys", "1000")]
                if token:
                    query.append(("continuation-token", token))
                page_started = self._begin()
                resp = self.call("list", "GET", None, query=query)
                if resp is None:
                    self.timed(page_started, False)
                    break
                self.stats.items += len(xml_text(resp.body, "Key"))
                self.timed(page_started, True, resp.nbytes, resp.ttfb_s)
                truncated = xml_text(resp.body, "IsTruncated")
                tokens = xml_text(resp.body, "NextContinuationToken")
                if not (truncated and truncated[0] == "true" and tokens):
                    break
                token = tokens[0]

    def delete(self, keys):
        for key in keys:
            started = self._begin()
            ok = self.call("delete", "DELETE", key, expect=(200, 204)) is not None
            self.timed(started, ok)


# ------------------------------------------------------------------------------------------------ the sweep


def wait_until(epoch):
    while True:
        left = epoch - time.time()
        if left <= 0:
            return
        time.sleep(min(left, 0.5))


def run_threads(workers, phase, deadline=None, small_cap=None, level_prefix=None):
    """Every worker through one phase, a thread each; a worker with no object of its own reads its neighbours'."""
    large = [k for w in workers for k in w.large_keys]
    small = [k for w in workers for k in w.small_keys]
    targets = {
        "put_large": lambda w: w.put_large(deadline),
        "get_large": lambda w: w.get_large(deadline, w.large_keys or large),
        "put_small": lambda w: w.put_small(deadline, small_cap),
        "get_small": lambda w: w.get_small(deadline, w.small_keys or small),
        "list": lambda w: w.list_keys(deadline, level_prefix),
        "delete": lambda w: w.delete(w.small_keys),
        "delete_large": lambda w: w.delete(w.large_keys),
    }
    threads = [threading.Thread(target=targets[phase], args=(w,)) for w in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def run_level(settings, signer, pool, scrub, level, worker_ids, level_start, node_workers):
    """This process's workers through the level's six phases; {phase: merged stats} plus extras."""
    budget = settings.phase_budget()
    workers = [Worker(settings, signer, pool, scrub, level, wid) for wid in worker_ids]
    out = {}
    # At most small_max small objects per level on this node, shared by all its workers.
    per_worker_small = max(1, math.ceil(settings.small_max / float(node_workers)))
    level_prefix = f"{settings.prefix}c{level}/"
    for index, phase in enumerate(PHASES):
        start = level_start + index * budget
        late = max(0.0, time.time() - start)
        wait_until(start)
        # A phase that starts late (the one before ran over: large objects on a slow store) is still timed for
        # duration_s; the next phases keep their schedule, so the nodes come back together.
        deadline = max(start, time.time()) + settings.duration_s
        for w in workers:
            w.stats = Stats()
        run_threads(workers, phase, deadline, per_worker_small, level_prefix)
        merged = None
        for w in workers:
            merged = merge_phase(merged, w.stats.as_dict())
        merged["scheduled"] = start
        merged["late_s"] = round(late, 4)
        out[phase] = merged
    # The large objects are removed too (not timed into the delete rate: a different object size).
    for w in workers:
        w.stats = Stats()
    run_threads(workers, "delete_large")
    large = None
    for w in workers:
        large = merge_phase(large, w.stats.as_dict())
    out["_delete_large"] = {"ops": large["ops"], "failed": large["errors"]["failed"]}
    out["_reconnects"] = sum(w.client.reconnects for w in workers)
    for w in workers:
        w.client.close()
    return out


def _child(settings, signer, pool, scrub, level, ids, start, workers, conn):
    try:
        result = run_level(settings, signer, pool, scrub, level, ids, start, workers)
        conn.send(json.dumps({"ok": result}))
    except BaseException as exc:  # the parent must always get an answer
        conn.send(json.dumps({"fatal": scrub(f"{type(exc).__name__}: {exc}")}))
    finally:
        conn.close()


def spread(workers, per_process):
    """Worker ids split over processes of at most ``per_process`` threads (no more processes than CPUs)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    procs = max(1, min(math.ceil(workers / float(per_process)), cpus, workers))
    return [list(range(p, workers, procs)) for p in range(procs)]


def run_level_spread(settings, signer, pool, scrub, level, workers, start):
    groups = spread(workers, settings.threads_per_process)
    if len(groups) == 1:
        result = run_level(settings, signer, pool, scrub, level, groups[0], start, workers)
        return result, 1
    import multiprocessing
    ctx = multiprocessing.get_context("fork")
    children = []
    for group in groups:
        parent_end, child_end = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child, args=(settings, signer, pool, scrub, level, group, start, workers,
                                                         child_end))
        proc.start()
        child_end.close()
        children.append((proc, parent_end))
    merged, fatal = {}, []
    for proc, pipe in children:
        try:
            answer = json.loads(pipe.recv())
        except (EOFError, OSError, ValueError):
            answer = {"fatal": "a worker process exited without an answer"}
        proc.join()
        if "fatal" in answer:
            fatal.append(answer["fatal"])
            continue
        for phase, stats in answer["ok"].items():
            if phase == "_reconnects":
                merged[phase] = merged.get(phase, 0) + stats
            elif phase == "_delete_large":
                into = merged.setdefault(phase, {"ops": 0, "failed": 0})
                into["ops"] += stats["ops"]
                into["failed"] += stats["failed"]
            else:
                late, scheduled = stats.pop("late_s"), stats.pop("scheduled")
                merged[phase] = merge_phase(merged.get(phase), stats)
                merged[phase]["late_s"] = max(late, merged[phase].get("late_s") or 0.0)
                merged[phase]["scheduled"] = scheduled
    if fatal:
        merged["_fatal"] = fatal
    return merged, len(groups)


# ------------------------------------------------------------------------------------------------ clean-up


def sweep(settings, signer, scrub):
    """Delete every object under this node's prefix and abort its unfinished multipart uploads."""
    client = Client(settings, signer)
    out = {"deleted": 0, "aborted": 0, "left": 0, "errors": 0, "samples": []}

    def note(what, resp=None, exc=None):
        out["errors"] += 1
        if len(out["samples"]) < MAX_ERROR_SAMPLES:
            detail = f"{type(exc).__name__}: {exc}" if exc else f"{resp.status} {error_of(resp)[0]}"
            out["samples"].append(scrub(f"{what}: {detail}")[:200])

    def listed():
        keys, token = [], None
        while True:
            query = [("list-type", "2"), ("prefix", settings.prefix), ("max-keys", "1000")]
            if token:
                query.append(("continuation-token", token))
            resp = client.request("GET", None, query=query)
            if resp.status != 200:
                note("list", resp)
                return None
            keys += xml_text(resp.body, "Key")
            tokens = xml_text(resp.body, "NextContinuationToken")
            if not (xml_text(resp.body, "IsTruncated")[:1] == ["true"] and tokens):
                return keys
            token = tokens[0]

    try:
        for key in listed() or []:
            resp = client.request("DELETE", key)
            if resp.status in (200, 204):
                out["deleted"] += 1
            else:
                note("delete", resp)
        resp = client.request("GET", None, query=[("uploads", ""), ("prefix", settings.prefix)])
        if resp.status == 200:
            root = ET.fromstring(resp.body)
            for upload in [el for el in root.iter() if el.tag.rsplit("}", 1)[-1] == "Upload"]:
                fields = dict((c.tag.rsplit("}", 1)[-1], c.text or "") for c in upload)
                done = client.request("DELETE", fields.get("Key"), query=[("uploadId", fields.get("UploadId", ""))])
                if done.status in (200, 204):
                    out["aborted"] += 1
                else:
                    note("abort", done)
        elif resp.status != 501:  # a store without ListMultipartUploads
            note("list uploads", resp)
        remaining = listed()
        out["left"] = None if remaining is None else len(remaining)
    except (OSError, http.client.HTTPException, ET.ParseError) as exc:
        note("sweep", exc=exc)
        out["left"] = None
    finally:
        client.close()
    return out


# ------------------------------------------------------------------------------------------------ endurance

ENDURANCE_OPS = ("put", "get", "list", "delete")
ENDURANCE_TOOL = "clustereval-s3bench-endurance"
ENDURANCE_KEEP = 16  # objects a worker holds before it deletes its oldest: the store's share stays bounded


class Interval:
    """The statistics of every operation in one interval, shared by the node's threads (under a lock)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.ops = {op: None for op in ENDURANCE_OPS}

    def add(self, op, stats):
        with self.lock:
            self.ops[op] = merge_phase(self.ops[op], stats.as_dict())


class EnduranceWorker(Worker):
    """One client running PUT, GET, LIST and DELETE in turn on its own objects until the deadline."""

    def __init__(self, settings, signer, pool, scrub, wid, box):
        Worker.__init__(self, settings, signer, pool, scrub, "e", wid)
        self.box = box  # box[0]: the current Interval (the main thread swaps it)

    def one(self, op, method, key=None, query=(), body=None, keep_body=False, expect=(200,), nbytes=0):
        self.stats = Stats()
        started = self._begin()
        resp = self.call(op, method, key, query=query, body=body, keep_body=keep_body, expect=expect)
        ok = resp is not None
        if ok and op == "get" and resp.nbytes != nbytes:
            self.stats.error("short_reads", {"op": op, "status": resp.status, "code": "ShortRead",
                                             "message": f"{resp.nbytes} of {nbytes} bytes"})
            ok = False
        self.timed(started, ok, nbytes if ok else 0, resp.ttfb_s if ok else None)
        self.box[0].add(op, self.stats)
        return resp if ok else None

    def run(self, deadline):
        size, n = self.s.endurance_bytes, 0
        while time.time() < deadline:
            key = f"{self.base}E{n:08d}"
            if self.one("put", "PUT", key, body=bytes(self.body(size)), nbytes=size) is not None:
                self.small_keys.append(key)
            n += 1
            if self.small_keys and time.time() < deadline:
                self.one("get", "GET", self.small_keys[self.rng.randrange(len(self.small_keys))], nbytes=size)
            if n % 4 == 0 and time.time() < deadline:
                self.one("list", "GET", None, query=[("list-type", "2"), ("prefix", self.base), ("max-keys", "100")])
            while len(self.small_keys) > ENDURANCE_KEEP and time.time() < deadline:
                if self.one("delete", "DELETE", self.small_keys[0], expect=(200, 204)) is None:
                    break
                self.small_keys.pop(0)
        self.client.close()


def endurance(settings, signer, pool, scrub, emit_line):
    """Mixed PUT/GET/LIST/DELETE for ``endurance_s``; one line per interval (so a run cut short keeps what it
    measured). Returns the intervals and the workers' reconnects."""
    workers_n = share(settings.max_concurrency, settings.node_index, settings.node_count)
    box = [Interval()]
    start = max(settings.start_at, time.time())
    wait_until(start)
    deadline = start + settings.endurance_s
    workers = [EnduranceWorker(settings, signer, pool, scrub, wid, box) for wid in range(workers_n)]
    # Daemon threads: on Ctrl-C the summary and the sweep still run without waiting for the deadline.
    threads = [threading.Thread(target=w.run, args=(deadline,), daemon=True) for w in workers]
    for thread in threads:
        thread.start()
    index, begun, lines = 0, start, []
    while begun < deadline:
        end = min(begun + settings.interval_s, deadline)
        wait_until(end)
        current, box[0] = box[0], Interval()
        with current.lock:
            line = {"tool": ENDURANCE_TOOL, "version": VERSION, "kind": "interval", "index": index,
                    "start": begun, "end": end, "workers": workers_n,
                    "ops": {op: stats for op, stats in current.ops.items() if stats is not None}}
        emit_line(line)
        lines.append(index)
        index, begun = index + 1, end
    for thread in threads:
        thread.join()
    # What finished after the last interval closed (a request in flight at the deadline) goes in a last one.
    tail = box[0]
    if any(tail.ops.values()):
        emit_line({"tool": ENDURANCE_TOOL, "version": VERSION, "kind": "interval", "index": index, "start": begun,
                   "end": time.time(), "workers": workers_n, "tail": True,
                   "ops": {op: stats for op, stats in tail.ops.items() if stats is not None}})
    return {"workers": workers_n, "intervals": len(lines), "reconnects": sum(w.client.reconnects for w in workers)}


def main_endurance(settings, signer, scrub):
    def emit_line(line):
        emit(line, scrub)

    summary = {"tool": ENDURANCE_TOOL, "version": VERSION, "kind": "summary", "host": socket.gethostname(),
               "settings": settings.public(), "started": time.time(), "done": False}
    summary["settings"].update(endurance_s=settings.endurance_s, interval_s=settings.interval_s,
                               endurance_bytes=settings.endurance_bytes)
    try:
        summary["preflight"] = check = preflight(settings, signer)
        if check["ok"]:
            pool = memoryview(os.urandom(settings.endurance_bytes + (1 << 16)))
            summary.update(endurance(settings, signer, pool, scrub, emit_line))
            summary["cleanup"] = sweep(settings, signer, scrub)
        summary["done"] = True
    except BaseException as exc:  # Ctrl-C included: the intervals already printed stay, the prefix is swept
        summary["fatal"] = scrub(f"{type(exc).__name__}: {exc}")
        try:
            summary["cleanup"] = sweep(settings, signer, scrub)
        except Exception as again:
            summary["cleanup"] = {"errors": 1, "samples": [scrub(f"sweep: {again}")[:200]], "left": None}
    summary["ended"] = time.time()
    emit(summary, scrub)
    return 0


# ------------------------------------------------------------------------------------------------ main


def preflight(settings, signer):
    """One listing of the node's prefix: reachability, credentials and the bucket, with its latency."""
    client = Client(settings, signer)
    started = time.perf_counter()
    try:
        resp = client.request("GET", None, query=[("list-type", "2"), ("prefix", settings.prefix), ("max-keys", "1")])
    except (OSError, http.client.HTTPException) as exc:
        kind = "tls" if isinstance(exc, ssl.SSLError) else "connect"
        return {"ok": False, "kind": kind, "error": f"{type(exc).__name__}: {exc}",
                "latency_s": time.perf_counter() - started}
    finally:
        client.close()
    latency = time.perf_counter() - started
    if resp.status == 200:
        return {"ok": True, "status": 200, "latency_s": latency, "ttfb_s": resp.ttfb_s}
    code, message = error_of(resp)
    kind = {"NoSuchBucket": "bucket", "InvalidAccessKeyId": "auth", "SignatureDoesNotMatch": "auth",
            "AccessDenied": "auth", "InvalidToken": "auth", "ExpiredToken": "auth",
            "AuthorizationHeaderMalformed": "auth"}.get(code, "server" if resp.status >= 500 else "http")
    if resp.status == 503 and code == "SlowDown":
        kind = "throttled"
    return {"ok": False, "kind": kind, "status": resp.status, "code": code, "error": message,
            "latency_s": latency}


def emit(document, scrub):
    sys.stdout.write(scrub(json.dumps(document, sort_keys=True)) + "\n")
    sys.stdout.flush()


def main(argv):
    try:
        settings = Settings()
    except ConfigError as exc:
        sys.stderr.write(f"clustereval_s3bench: {exc}\n")
        return 2
    scrub = Scrubber(settings.secrets())
    signer = Signer(settings.access_key, settings.secret_key, settings.session_token, settings.region)
    if "--cleanup" in argv:
        emit({"tool": "clustereval-s3bench", "version": VERSION, "cleanup": sweep(settings, signer, scrub)}, scrub)
        return 0
    if "--endurance" in argv:
        return main_endurance(settings, signer, scrub)
    document = {"tool": "clustereval-s3bench", "version": VERSION, "host": socket.gethostname(),
                "python": sys.version.split()[0], "settings": settings.public(), "started": time.time(),
                "start_at": settings.start_at, "levels": [], "done": False}
    try:
        document["preflight"] = check = preflight(settings, signer)
        if check["ok"]:
            pool = memoryview(os.urandom(max(settings.part_bytes, settings.large_bytes if settings.large_bytes <=
                                             settings.part_bytes else 0, settings.small_bytes) + (1 << 16)))
            start = max(settings.start_at, time.time())
            document["late_s"] = round(max(0.0, time.time() - settings.start_at), 4) if settings.start_at else 0.0
            level_span = settings.phase_budget() * len(PHASES)
            for index, level in enumerate(settings.levels):
                workers = share(level, settings.node_index, settings.node_count)
                level_start = start + index * level_span
                entry = {"concurrency": level, "workers": workers, "processes": 0, "phases": {}}
                if workers:
                    phases, procs = run_level_spread(settings, signer, pool, scrub, level, workers, level_start)
                    entry["processes"] = procs
                    entry["reconnects"] = phases.pop("_reconnects", 0)
                    entry["delete_large"] = phases.pop("_delete_large", None)
                    entry["fatal"] = phases.pop("_fatal", None)
                    entry["phases"] = phases
                document["levels"].append(entry)
            wait_until(start + len(settings.levels) * level_span)  # every node's load ends together
            document["cleanup"] = sweep(settings, signer, scrub)  # nothing was written when the preflight failed
        document["done"] = True
    except Exception as exc:
        document["fatal"] = scrub(f"{type(exc).__name__}: {exc}")
        document["traceback"] = scrub(traceback.format_exc())[-2000:]
        try:
            document["cleanup"] = sweep(settings, signer, scrub)
        except Exception as again:
            document["cleanup"] = {"errors": 1, "samples": [scrub(f"sweep: {again}")[:200]], "left": None}
    document["ended"] = time.time()
    emit(document, scrub)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
