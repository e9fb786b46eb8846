"""A small Kubernetes API server for the tests, reached by the real ``kubernetes`` client.

No Kubernetes API server can run on the test machines, so this is the one stand-in of the
test suite. It speaks HTTPS (a CA made for the test with ``trustme``) with bearer-token
authentication, and the test writes a kubeconfig for it, so the client's whole path is used:
kubeconfig loading, TLS, auth headers, chunked responses.

What it does as kube-apiserver does:

* discovery: ``/api``, ``/api/v1``, ``/apis``, ``/apis/<group>``, ``/apis/<group>/<version>``;
  a CRD that is not installed is absent from all of them and its paths answer 404;
* ``/version`` (``major``, ``minor``, ``gitVersion``), and GET of an installed CRD's
  CustomResourceDefinition (``/apis/apiextensions.k8s.io/v1/customresourcedefinitions/<name>``)
  with the labels its project's release manifests give it (KEDA's
  ``app.kubernetes.io/version``, Knative's ``serving.knative.dev/release``, none for KServe);
* one resourceVersion counter for the whole server (etcd's revision); each write raises it
  and stamps ``metadata.resourceVersion`` (plus ``uid``, ``creationTimestamp``, ``generation``);
* list, across namespaces or in one: ``labelSelector`` (``=``, ``==``, ``!=``, ``in``,
  ``notin``, existence), ``fieldSelector`` on ``metadata.name``/``metadata.namespace``,
  ``limit`` and ``continue`` over a consistent snapshot; a continue token older than the
  compaction point is ``410 Expired``. Items of built-in kinds carry no apiVersion/kind;
  items of CRDs do (as the server encodes them);
* watch (``?watch=1``): the events after ``resourceVersion`` from history, then live ones, as
  chunked newline-delimited JSON until ``timeoutSeconds``; ``resourceVersion`` "" or "0"
  starts with ADDED for what exists; a resourceVersion older than the compaction point gets
  an ERROR event carrying a 410 ``Expired`` Status (the watch cache's answer); objects that
  move in or out of a label selector arrive as ADDED or DELETED; ``allowWatchBookmarks``
  brings BOOKMARK events;
* create (POST), replace (PUT, with resourceVersion conflicts), the status subresource (PUT),
  delete (DELETE), and ``Status`` bodies for every error (401, 403 in RBAC's wording, 404,
  409, 410);
* RBAC by resource and namespace: a resource in ``forbidden`` is denied everywhere (no role
  grants it); one in ``granted_in`` is allowed only in the namespaces listed for it (Roles
  there, no ClusterRole), so that a request at the cluster scope or in another namespace is
  denied, as kube-apiserver's RBAC authorizer denies it; ``granted_names`` adds the objects
  Roles grant by ``resourceNames`` (a list or watch must name the object in its
  fieldSelector);
* the aggregated metrics APIs as prometheus-adapter serves them:
  ``custom.metrics.k8s.io/v1beta1`` (pods by label selector, a named object, a namespace) and
  ``external.metrics.k8s.io/v1beta1``, from values the test sets; registered-but-down
  answers 503 as the aggregator does.

What it does not do (the tests do not depend on it): admission, validation and defaulting of
objects (it stores what it is given), PATCH and server-side apply, managedFields, protobuf,
more than one served version per resource (autoscaling is served as v2 only), field
selectors beyond name and namespace, RBAC by verb or by resourceName (a grant is for every
verb), garbage collection through ownerReferences, and the metrics APIs' own discovery of
which metrics exist beyond listing what the test configured. Bookmarks come every
``bookmark_interval`` seconds rather than about once a minute.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import re
import ssl
import threading
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

import trustme
import yaml
from aiohttp import web


class RawJSON:
    """A value the fake serves as the JSON text given, however deeply it nests: kube-apiserver
    stores and serves objects 10,000 levels deep (Go's encoding/json limit), while Python's
    ``json.dumps`` and ``copy.deepcopy`` stop near 1,000."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __deepcopy__(self, memo: dict[int, Any]) -> RawJSON:
        return self


def dumps(value: Any) -> str:
    """``json.dumps`` with each ``RawJSON`` written as its text."""
    raw: dict[str, str] = {}

    def placeholder(item: Any) -> str:
        if not isinstance(item, RawJSON):
            raise TypeError(f"{type(item).__name__} is not JSON")
        key = f"\u0000raw{len(raw)}\u0000"
        raw[json.dumps(key)] = item.text
        return key

    text = json.dumps(value, default=placeholder)
    for key, item in raw.items():
        text = text.replace(key, item)
    return text


def _json_response(value: Any, status: int = 200) -> web.Response:
    return web.json_response(value, status=status, dumps=dumps)


TOKEN = "gpulint-test-token"
USER = "system:serviceaccount:gpulint:gpulint"
CUSTOM_METRICS = "custom.metrics.k8s.io"
EXTERNAL_METRICS = "external.metrics.k8s.io"


class Resource(NamedTuple):
    group: str
    version: str
    kind: str
    plural: str
    builtin: bool = True  # list items of built-in kinds are encoded without apiVersion/kind
    namespaced: bool = True  # Namespaces and ClusterPolicies are not

    @property
    def key(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


BUILTIN = (
    Resource("", "v1", "ConfigMap", "configmaps"),
    Resource("", "v1", "Pod", "pods"),
    Resource("", "v1", "Service", "services"),
    Resource("", "v1", "Endpoints", "endpoints"),
    Resource("", "v1", "Namespace", "namespaces", namespaced=False),
    Resource("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices"),
    Resource("apps", "v1", "Deployment", "deployments"),
    Resource("apps", "v1", "StatefulSet", "statefulsets"),
    Resource("apps", "v1", "DaemonSet", "daemonsets"),
    Resource("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers"),
    Resource("resource.k8s.io", "v1", "ResourceClaimTemplate", "resourceclaimtemplates"),
    Resource("resource.k8s.io", "v1", "ResourceClaim", "resourceclaims"),
    Resource("resource.k8s.io", "v1", "DeviceClass", "deviceclasses", namespaced=False),
    Resource("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets"),
)
CRDS = {
    "keda": (
        Resource("keda.sh", "v1alpha1", "ScaledObject", "scaledobjects", False),
        Resource("keda.sh", "v1alpha1", "ScaledJob", "scaledjobs", False),
    ),
    "vpa": (
        Resource(
            "autoscaling.k8s.io", "v1", "VerticalPodAutoscaler", "verticalpodautoscalers", False
        ),
    ),
    "kserve": (
        Resource("serving.kserve.io", "v1beta1", "InferenceService", "inferenceservices", False),
    ),
    "knative": (
        Resource("serving.knative.dev", "v1", "Service", "services", False),
        Resource("serving.knative.dev", "v1", "Configuration", "configurations", False),
        Resource("serving.knative.dev", "v1", "Revision", "revisions", False),
    ),
    "prometheus-operator": (
        Resource("monitoring.coreos.com", "v1", "ServiceMonitor", "servicemonitors", False),
        Resource("monitoring.coreos.com", "v1", "PodMonitor", "podmonitors", False),
        Resource("monitoring.coreos.com", "v1", "Prometheus", "prometheuses", False),
    ),
    "gpu-operator": (
        Resource("nvidia.com", "v1", "ClusterPolicy", "clusterpolicies", False, namespaced=False),
    ),
    # The LLM serving stacks (kserve/kserve config/crd/full/llmisvc; llm-d's workload variant
    # autoscaler config/crd/bases; gateway-api-inference-extension config/crd/bases;
    # vllm-project/aibrix config/crd/autoscaling; kubeai-project/kubeai charts/kubeai/crds;
    # vllm-project/production-stack operator/config/crd; NVIDIA/k8s-nim-operator
    # bundle/manifests), each at its storage version.
    "kserve-llmisvc": (
        Resource(
            "serving.kserve.io", "v1alpha2", "LLMInferenceService", "llminferenceservices", False
        ),
    ),
    "llm-d": (
        Resource("llmd.ai", "v1alpha1", "VariantAutoscaling", "variantautoscalings", False),
        Resource("inference.networking.k8s.io", "v1", "InferencePool", "inferencepools", False),
    ),
    "aibrix": (
        Resource("autoscaling.aibrix.ai", "v1alpha1", "PodAutoscaler", "podautoscalers", False),
    ),
    "kubeai": (Resource("kubeai.org", "v1", "Model", "models", False),),
    "production-stack": (
        Resource("production-stack.vllm.ai", "v1alpha1", "VLLMRuntime", "vllmruntimes", False),
    ),
    "nim-operator": (Resource("apps.nvidia.com", "v1alpha1", "NIMService", "nimservices", False),),
}
# What a FakeCluster serves unless a test says otherwise.
DEFAULT_CRDS = (
    "keda",
    "kserve",
    "knative",
    "prometheus-operator",
    "vpa",
    "kserve-llmisvc",
    "llm-d",
    "aibrix",
    "kubeai",
    "production-stack",
    "nim-operator",
)


# What the projects' release manifests label their CRDs with (gpulint.cluster.versions).
CRD_LABELS = {
    "scaledobjects.keda.sh": {"app.kubernetes.io/version": "2.20.2"},
    "services.serving.knative.dev": {"serving.knative.dev/release": "v1.23.0"},
}
CRD_RESOURCE = "customresourcedefinitions.apiextensions.k8s.io"


def status(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body


def _key(resource: Resource, meta: dict) -> tuple[str, str]:
    namespace = (meta.get("namespace") or "default") if resource.namespaced else ""
    return (namespace, meta.get("name", ""))


class ApiFailure(Exception):
    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.body = status(code, reason, message)
        self.code = code


# --- selectors (written apart from gpulint's own, so that the two are not wrong together) ---

_SET = re.compile(r"^\s*([\w./-]+)\s+(in|notin)\s*\(([^)]*)\)\s*$")
_EQUALITY = re.compile(r"^\s*([\w./-]+)\s*(==|=|!=)\s*([\w.-]*)\s*$")
_EXISTS = re.compile(r"^\s*(!?)\s*([\w./-]+)\s*$")


def label_filter(text: str) -> Any:
    """A predicate on a labels dict; ApiFailure(400) for a selector that does not parse."""
    checks = []
    depth, part, parts = 0, "", []
    for char in text:
        depth += char == "("
        depth -= char == ")"
        if char == "," and depth == 0:
            parts.append(part)
            part = ""
        else:
            part += char
    parts.append(part)
    for part in parts:
        if not part.strip():
            continue
        if match := _SET.match(part):
            key, op = match.group(1), match.group(2)
            values = {v.strip() for v in match.group(3).split(",") if v.strip()}
            if op == "in":
                checks.append(lambda labels, k=key, v=values: labels.get(k) in v)
            else:
                checks.append(lambda labels, k=key, v=values: labels.get(k) not in v)
        elif match := _EQUALITY.match(part):
            key, op, value = match.groups()
            if op == "!=":
                checks.append(lambda labels, k=key, v=value: labels.get(k) != v)
            else:
                checks.append(lambda labels, k=key, v=value: labels.get(k) == v)
        elif match := _EXISTS.match(part):
            negated, key = match.groups()
            if negated:
                checks.append(lambda labels, k=key: k not in labels)
            else:
                checks.append(lambda labels, k=key: k in labels)
        else:
            raise ApiFailure(400, "BadRequest", f"unable to parse requirement: {part!r}")
    return lambda labels: all(check(labels) for check in checks)


def _named_by(selector: str | None) -> str:
    """The object a fieldSelector names exactly (``metadata.name=x``), else ""."""
    for part in (selector or "").split(","):
        match = re.match(r"^\s*metadata\.name\s*==?\s*(\S+)\s*$", part)
        if match:
            return match.group(1)
    return ""


def field_filter(text: str) -> Any:
    checks = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        match = re.match(r"^([\w.]+)\s*(==|=|!=)\s*(.*)$", part)
        if not match or match.group(1) not in ("metadata.name", "metadata.namespace"):
            raise ApiFailure(400, "BadRequest", f"field label not supported: {part}")
        field, op, value = match.groups()
        attribute = field.split(".")[1]
        if op == "!=":
            checks.append(lambda meta, a=attribute, v=value: meta.get(a, "") != v)
        else:
            checks.append(lambda meta, a=attribute, v=value: meta.get(a, "") == v)
    return lambda meta: all(check(meta) for check in checks)


class _Event(NamedTuple):
    revision: int
    type: str
    resource: str
    old: dict | None
    new: dict


class _Watcher:
    def __init__(self, loop: asyncio.AbstractEventLoop, resource: str, namespace: str) -> None:
        self.loop = loop
        self.resource = resource
        self.namespace = namespace
        self.queue: asyncio.Queue[_Event] = asyncio.Queue()

    def offer(self, event: _Event) -> None:
        self.loop.call_soon_threadsafe(self.queue.put_nowait, event)


class FakeCluster:
    """The API server's state: objects, history, watchers, RBAC, metrics."""

    def __init__(self, crds: Iterable[str] = DEFAULT_CRDS) -> None:
        self.lock = threading.RLock()
        self.resources: dict[str, Resource] = {}
        for resource in BUILTIN:
            self.resources[resource.key] = resource
        for name in crds:
            for resource in CRDS[name]:
                self.resources[resource.key] = resource
        self.objects: dict[str, dict[tuple[str, str], dict]] = {k: {} for k in self.resources}
        self.revision = 1000
        self.horizon = self.revision  # history before this is compacted away
        self.history: list[_Event] = []
        self.watchers: set[_Watcher] = set()
        self.snapshots: dict[str, tuple[int, list[dict]]] = {}
        self.forbidden: set[str] = set()  # resource keys the token may not read
        # resource key -> the namespaces where a Role grants it (denied everywhere else)
        self.granted_in: dict[str, set[str]] = {}
        # resource key -> namespace -> the objects a Role grants there by resourceNames: got
        # by name, or listed and watched with the fieldSelector metadata.name=<name>
        # (kube-apiserver takes a list's name from that selector: RequestInfoFactory).
        self.granted_names: dict[str, dict[str, set[str]]] = {}
        self.custom_values: list[dict[str, Any]] = []
        self.external_values: list[dict[str, Any]] = []
        self.metrics_apis = {"custom": "up", "external": "up"}  # up | down | absent
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.bookmark_interval = 5.0
        self.expired_watches = 0  # watches answered with a 410 ERROR event
        self.pause_between_pages: Any = None  # a test hook (path) run before a next page
        # /version, and the labels of each installed CRD's CustomResourceDefinition.
        self.version: dict[str, str] = {"major": "1", "minor": "37", "gitVersion": "v1.37.1"}
        self.crd_labels: dict[str, dict[str, str]] = dict(CRD_LABELS)

    # --- writes (what `kubectl apply` would cause) -------------------------------------------

    def resource_of(self, obj: dict) -> Resource:
        api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
        for resource in self.resources.values():
            if resource.api_version == api_version and resource.kind == kind:
                return resource
        raise ApiFailure(
            404, "NotFound", f"the server could not find the requested resource ({kind})"
        )

    def _stamp(self, obj: dict, previous: dict | None) -> None:
        self.revision += 1
        meta = obj.setdefault("metadata", {})
        meta["resourceVersion"] = str(self.revision)
        if self.resource_of(obj).namespaced:
            meta.setdefault("namespace", "default")
        if previous is None:
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            meta["generation"] = 1
        else:
            old_meta = previous.get("metadata", {})
            meta["uid"] = old_meta.get("uid")
            meta["creationTimestamp"] = old_meta.get("creationTimestamp")
            changed = obj.get("spec") != previous.get("spec")
            meta["generation"] = old_meta.get("generation", 1) + (1 if changed else 0)

    def _record(self, kind: str, resource: Resource, old: dict | None, new: dict) -> None:
        event = _Event(self.revision, kind, resource.key, old, copy.deepcopy(new))
        self.history.append(event)
        for watcher in list(self.watchers):
            if watcher.resource == resource.key:
                watcher.offer(event)

    def create(self, obj: dict) -> dict:
        obj = copy.deepcopy(obj)
        with self.lock:
            resource = self.resource_of(obj)
            meta = obj.setdefault("metadata", {})
            key = _key(resource, meta)
            if key in self.objects[resource.key]:
                raise ApiFailure(409, "AlreadyExists", f'{resource.key} "{key[1]}" already exists')
            self._stamp(obj, None)
            self.objects[resource.key][key] = obj
            self._record("ADDED", resource, None, obj)
            return copy.deepcopy(obj)

    def replace(self, obj: dict, subresource: str = "") -> dict:
        obj = copy.deepcopy(obj)
        with self.lock:
            resource = self.resource_of(obj)
            meta = obj.setdefault("metadata", {})
            key = _key(resource, meta)
            previous = self.objects[resource.key].get(key)
            if previous is None:
                raise ApiFailure(404, "NotFound", f'{resource.key} "{key[1]}" not found')
            asked = meta.get("resourceVersion")
            if asked and asked != previous["metadata"]["resourceVersion"]:
                raise ApiFailure(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on {resource.key} "{key[1]}": the object '
                    "has been modified; please apply your changes to the latest version and "
                    "try again",
                )
            if subresource == "status":
                merged = copy.deepcopy(previous)
                merged["status"] = obj.get("status")
                obj = merged
            elif "status" in previous:
                obj["status"] = copy.deepcopy(previous["status"])
            self._stamp(obj, previous)
            self.objects[resource.key][key] = obj
            self._record("MODIFIED", resource, previous, obj)
            return copy.deepcopy(obj)

    def grant_as(self, cluster_roles: list[dict], roles: list[dict]) -> None:
        """RBAC as these ClusterRoles and Roles grant it (the union, as Kubernetes reads it):
        a resource a ClusterRole grants is readable everywhere, one that only Roles grant is
        readable in their namespaces, and every other resource is forbidden."""

        def granted(role: dict, named: bool = False) -> set[tuple[str, str]]:
            return {
                (group, resource)
                for rule in role["rules"]
                if bool(rule.get("resourceNames")) == named
                for group in rule["apiGroups"]
                for resource in rule["resources"]
            }

        everywhere = set().union(*(granted(role) for role in cluster_roles))
        in_namespaces: dict[tuple[str, str], set[str]] = {}
        by_name: dict[tuple[str, str], dict[str, set[str]]] = {}
        for role in roles:
            namespace = role["metadata"]["namespace"]
            for pair in granted(role):
                in_namespaces.setdefault(pair, set()).add(namespace)
            for rule in role["rules"]:
                for group in rule["apiGroups"] if rule.get("resourceNames") else ():
                    for plural in rule["resources"]:
                        names = by_name.setdefault((group, plural), {})
                        names.setdefault(namespace, set()).update(rule["resourceNames"])
        for key, resource in self.resources.items():
            pair = (resource.group, resource.plural)
            if pair in everywhere:
                continue
            if pair in by_name:
                self.granted_names[key] = by_name[pair]
            if pair in in_namespaces or pair in by_name:
                self.granted_in[key] = in_namespaces.get(pair, set())
            else:
                self.forbidden.add(key)
        if ("apiextensions.k8s.io", "customresourcedefinitions") not in everywhere:
            self.forbidden.add(CRD_RESOURCE)

    def apply(self, obj: dict) -> dict:
        """Create, or replace what exists (status included, as a test setting it wants)."""
        with self.lock:
            resource = self.resource_of(obj)
            meta = obj.get("metadata", {})
            key = _key(resource, meta)
            if key not in self.objects[resource.key]:
                return self.create(obj)
            stored = self.replace(obj)
            if "status" in obj:
                stored = self.replace({**stored, "status": obj["status"]}, "status")
            return stored

    def delete(self, api_version: str, kind: str, namespace: str, name: str) -> dict:
        with self.lock:
            resource = self.resource_of({"apiVersion": api_version, "kind": kind})
            previous = self.objects[resource.key].pop((namespace, name), None)
            if previous is None:
                raise ApiFailure(404, "NotFound", f'{resource.key} "{name}" not found')
            self.revision += 1
            final = copy.deepcopy(previous)
            final["metadata"]["resourceVersion"] = str(self.revision)
            self._record("DELETED", resource, previous, final)
            return final

    def load(self, text: str) -> None:
        for obj in yaml.safe_load_all(text):
            if isinstance(obj, dict) and "apiVersion" in obj and "kind" in obj:
                self.apply(obj)

    def compact(self) -> None:
        """Forget history, as etcd compaction does: older resourceVersions now answer 410."""
        with self.lock:
            self.horizon = self.revision
            self.history.clear()

    def uninstall(self, crd: str) -> None:
        with self.lock:
            for resource in CRDS[crd]:
                self.resources.pop(resource.key, None)
                self.objects.pop(resource.key, None)

    # --- reads ---------------------------------------------------------------------------------

    def encode(self, resource: Resource, obj: dict, in_list: bool) -> dict:
        if in_list and resource.builtin:
            return {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
        return {"apiVersion": resource.api_version, "kind": resource.kind, **obj}

    def list(
        self,
        resource: Resource,
        namespace: str,
        labels: Any,
        fields: Any,
        limit: int,
        token: str,
    ) -> dict:
        with self.lock:
            if token:
                snapshot = self.snapshots.get(token)
                if snapshot is None:
                    raise ApiFailure(400, "BadRequest", "continue key is not valid")
                revision, items = snapshot
                if revision < self.horizon:
                    raise ApiFailure(
                        410,
                        "Expired",
                        "The provided continue parameter is too old to display a consistent "
                        "list result. You can start a new list without the continue parameter.",
                    )
            else:
                revision = self.revision
                items = [
                    copy.deepcopy(obj)
                    for (ns, _), obj in sorted(self.objects[resource.key].items())
                    if (not namespace or ns == namespace)
                    and labels(obj["metadata"].get("labels") or {})
                    and fields(obj["metadata"])
                ]
            page, rest = (items[:limit], items[limit:]) if limit else (items, [])
            metadata: dict[str, Any] = {"resourceVersion": str(revision)}
            if rest:
                next_token = base64.b64encode(
                    json.dumps({"rv": revision, "start": uuid.uuid4().hex}).encode()
                ).decode()
                self.snapshots[next_token] = (revision, rest)
                metadata["continue"] = next_token
                metadata["remainingItemCount"] = len(rest)
            return {
                "kind": f"{resource.kind}List",
                "apiVersion": resource.api_version,
                "metadata": metadata,
                "items": [self.encode(resource, obj, in_list=True) for obj in page],
            }


class KubeFake:
    """The HTTPS server around a FakeCluster, in a thread of its own."""

    def __init__(self, cluster: FakeCluster | None = None) -> None:
        self.cluster = cluster or FakeCluster()
        self.ca = trustme.CA()
        self._cert = self.ca.issue_cert("127.0.0.1", "localhost")
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.token = TOKEN

    # --- life cycle ----------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def start(self) -> KubeFake:
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        def serve() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(self._open())
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=serve, name="kubefake", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the fake API server did not start")
        return self

    def __enter__(self) -> KubeFake:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _open(self) -> None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._cert.configure_cert(context)
        app = web.Application(client_max_size=8 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port, ssl_context=context)
        await site.start()
        if not self.port:
            server = site._server
            assert server is not None
            self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    def stop(self) -> None:
        """Go away at once, as a crashed API server does: open watches break mid-stream."""
        if self._loop is None:
            return
        future = asyncio.run_coroutine_threadsafe(self._close(), self._loop)
        future.result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        assert self._thread is not None
        self._thread.join(10)
        self._loop.close()
        self._loop = None

    async def _close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._runner is not None:
            await self._runner.cleanup()

    def restart(self) -> None:
        """Come back on the same port with the same state."""
        self.start()

    def write_kubeconfig(self, path: Path, token: str | None = None) -> Path:
        ca = base64.b64encode(self.ca.cert_pem.bytes()).decode()
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "fake", "cluster": {"server": self.url, "certificate-authority-data": ca}}
            ],
            "users": [{"name": "gpulint", "user": {"token": token or self.token}}],
            "contexts": [
                {"name": "fake", "context": {"cluster": "fake", "user": "gpulint"}},
                {"name": "other", "context": {"cluster": "fake", "user": "gpulint"}},
            ],
            "current-context": "fake",
        }
        path.write_text(yaml.safe_dump(config))
        return path

    # --- HTTP ------------------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        cluster = self.cluster
        query = dict(request.query)
        cluster.requests.append((request.method, request.path, query))
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return web.json_response(status(401, "Unauthorized", "Unauthorized"), status=401)
        try:
            return await self._route(request, request.path.rstrip("/") or "/", query)
        except ApiFailure as failure:
            return web.json_response(failure.body, status=failure.code)

    async def _route(
        self, request: web.Request, path: str, query: dict[str, str]
    ) -> web.StreamResponse:
        parts = path.strip("/").split("/")
        if path == "/version":
            return web.json_response(self.cluster.version)
        if parts[:4] == ["apis", "apiextensions.k8s.io", "v1", "customresourcedefinitions"]:
            return self._crd(parts[4:])
        if path == "/api":
            return web.json_response(
                {
                    "kind": "APIVersions",
                    "versions": ["v1"],
                    "serverAddressByClientCIDRs": [
                        {"clientCIDR": "0.0.0.0/0", "serverAddress": f"127.0.0.1:{self.port}"}
                    ],
                }
            )
        if path == "/apis":
            return web.json_response(
                {"kind": "APIGroupList", "apiVersion": "v1", "groups": self._groups()}
            )
        if (
            parts[0] == "apis"
            and len(parts) >= 2
            and parts[1]
            in (
                CUSTOM_METRICS,
                EXTERNAL_METRICS,
            )
        ):
            return self._metrics(parts, query)
        if parts[0] == "apis" and len(parts) == 2:
            group = next((g for g in self._groups() if g["name"] == parts[1]), None)
            if group is None:
                raise ApiFailure(
                    404, "NotFound", "the server could not find the requested resource"
                )
            return web.json_response({"kind": "APIGroup", "apiVersion": "v1", **group})
        if (parts[0] == "api" and len(parts) == 2) or (parts[0] == "apis" and len(parts) == 3):
            group, version = ("", parts[1]) if parts[0] == "api" else (parts[1], parts[2])
            return self._resource_list(group, version)
        return await self._objects(request, parts, query)

    def _crd(self, rest: list[str]) -> web.Response:
        """An installed CRD's CustomResourceDefinition (GET by name only)."""
        cluster = self.cluster
        if CRD_RESOURCE in cluster.forbidden:
            raise ApiFailure(
                403,
                "Forbidden",
                f'customresourcedefinitions.apiextensions.k8s.io "{rest[0] if rest else ""}" '
                f'is forbidden: User "{USER}" cannot get resource "customresourcedefinitions" '
                'in API group "apiextensions.k8s.io" at the cluster scope',
            )
        with cluster.lock:
            installed = {r.key: r for r in cluster.resources.values() if not r.builtin and r.group}
        if len(rest) != 1 or rest[0] not in installed:
            raise ApiFailure(404, "NotFound", "the server could not find the requested resource")
        resource = installed[rest[0]]
        return web.json_response(
            {
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {
                    "name": resource.key,
                    "labels": cluster.crd_labels.get(resource.key, {}),
                },
                "spec": {
                    "group": resource.group,
                    "names": {"kind": resource.kind, "plural": resource.plural},
                    "versions": [{"name": resource.version, "served": True, "storage": True}],
                },
            }
        )

    def _groups(self) -> list[dict[str, Any]]:
        groups: dict[str, list[str]] = {}
        with self.cluster.lock:
            for resource in self.cluster.resources.values():
                if resource.group and resource.version not in groups.setdefault(resource.group, []):
                    groups[resource.group].append(resource.version)
        for api, group in (("custom", CUSTOM_METRICS), ("external", EXTERNAL_METRICS)):
            if self.cluster.metrics_apis[api] != "absent":
                groups[group] = ["v1beta1"]
        found = []
        for name, versions in sorted(groups.items()):
            listed = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
            found.append({"name": name, "versions": listed, "preferredVersion": listed[0]})
        return found

    def _resource_list(self, group: str, version: str) -> web.Response:
        with self.cluster.lock:
            served = [
                r
                for r in self.cluster.resources.values()
                if r.group == group and r.version == version
            ]
        if not served:
            raise ApiFailure(404, "NotFound", "the server could not find the requested resource")
        resources = []
        verbs = ["create", "delete", "get", "list", "patch", "update", "watch"]
        for r in served:
            resources.append(
                {
                    "name": r.plural,
                    "singularName": r.kind.lower(),
                    "namespaced": r.namespaced,
                    "kind": r.kind,
                    "verbs": verbs,
                }
            )
            resources.append(
                {
                    "name": f"{r.plural}/status",
                    "singularName": "",
                    "namespaced": True,
                    "kind": r.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
        return web.json_response(
            {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": f"{group}/{version}" if group else version,
                "resources": resources,
            }
        )

    async def _objects(
        self, request: web.Request, parts: list[str], query: dict[str, str]
    ) -> web.StreamResponse:
        # /api/v1/[namespaces/<ns>/]<plural>[/<name>[/status]] and the same under /apis/<g>/<v>
        if parts[0] == "api":
            group, version, rest = "", parts[1], parts[2:]
        else:
            group, version, rest = parts[1], parts[2], parts[3:]
        namespace = ""
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if not rest:
            raise ApiFailure(404, "NotFound", "the server could not find the requested resource")
        plural, name, subresource = (
            rest[0],
            rest[1] if len(rest) > 1 else "",
            rest[2] if len(rest) > 2 else "",
        )
        with self.cluster.lock:
            resource = next(
                (
                    r
                    for r in self.cluster.resources.values()
                    if r.group == group and r.version == version and r.plural == plural
                ),
                None,
            )
        if resource is None:
            raise ApiFailure(404, "NotFound", "the server could not find the requested resource")
        watching = query.get("watch") in ("1", "true")
        verb = {
            "GET": "watch" if watching else ("get" if name else "list"),
            "POST": "create",
            "PUT": "update",
            "DELETE": "delete",
        }.get(request.method, "")
        self._authorize(resource, verb, namespace, name or _named_by(query.get("fieldSelector")))
        if request.method == "GET" and not name:
            labels = label_filter(query.get("labelSelector", ""))
            fields = field_filter(query.get("fieldSelector", ""))
            if watching:
                return await self._watch(request, resource, namespace, labels, fields, query)
            limit = int(query.get("limit") or 0)
            if self.cluster.pause_between_pages is not None and query.get("continue"):
                self.cluster.pause_between_pages(request.path)
            return _json_response(
                self.cluster.list(
                    resource, namespace, labels, fields, limit, query.get("continue", "")
                )
            )
        if request.method == "GET":
            with self.cluster.lock:
                obj = self.cluster.objects[resource.key].get((namespace, name))
            if obj is None:
                raise ApiFailure(404, "NotFound", f'{resource.key} "{name}" not found')
            return _json_response(self.cluster.encode(resource, obj, in_list=False))
        if request.method == "POST":
            body = await request.json()
            body.setdefault("metadata", {}).setdefault("namespace", namespace)
            created = self.cluster.create(body)
            return _json_response(self.cluster.encode(resource, created, False), status=201)
        if request.method == "PUT":
            body = await request.json()
            body.setdefault("metadata", {}).setdefault("namespace", namespace)
            replaced = self.cluster.replace(body, subresource)
            return _json_response(self.cluster.encode(resource, replaced, False))
        if request.method == "DELETE":
            deleted = self.cluster.delete(resource.api_version, resource.kind, namespace, name)
            return _json_response(self.cluster.encode(resource, deleted, False))
        raise ApiFailure(405, "MethodNotAllowed", f"{request.method} is not supported")

    def _authorize(self, resource: Resource, verb: str, namespace: str, name: str = "") -> None:
        granted = self.cluster.granted_in.get(resource.key)
        if resource.key not in self.cluster.forbidden and (
            granted is None or (namespace and namespace in granted)
        ):
            return
        names = self.cluster.granted_names.get(resource.key, {}).get(namespace, set())
        if name and name in names and verb in ("get", "list", "watch"):
            return
        scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
        message = (
            f'{resource.key} is forbidden: User "{USER}" cannot {verb} resource '
            f'"{resource.plural}" in API group "{resource.group}" {scope}'
        )
        raise ApiFailure(403, "Forbidden", message)

    async def _watch(
        self,
        request: web.Request,
        resource: Resource,
        namespace: str,
        labels: Any,
        fields: Any,
        query: dict[str, str],
    ) -> web.StreamResponse:
        cluster = self.cluster
        timeout = float(query.get("timeoutSeconds") or 1800)
        bookmarks = query.get("allowWatchBookmarks") == "true"
        since = query.get("resourceVersion", "")
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)

        def selected(obj: dict | None) -> bool:
            if obj is None:
                return False
            meta = obj.get("metadata", {})
            if namespace and meta.get("namespace") != namespace:
                return False
            return bool(labels(meta.get("labels") or {}) and fields(meta))

        async def send(kind: str, obj: dict) -> None:
            line = dumps({"type": kind, "object": cluster.encode(resource, obj, False)})
            await response.write(line.encode() + b"\n")

        watcher = _Watcher(asyncio.get_running_loop(), resource.key, namespace)
        with cluster.lock:
            if since in ("", "0"):
                backlog = [
                    _Event(cluster.revision, "ADDED", resource.key, None, copy.deepcopy(obj))
                    for obj in cluster.objects[resource.key].values()
                ]
                expired = False
            else:
                expired = int(since) < cluster.horizon
                backlog = [
                    e
                    for e in cluster.history
                    if e.revision > int(since) and e.resource == resource.key
                ]
            revision = cluster.revision
            if not expired:
                cluster.watchers.add(watcher)
        try:
            if expired:
                cluster.expired_watches += 1
                gone = status(
                    410, "Expired", f"too old resource version: {since} ({cluster.horizon})"
                )
                await send("ERROR", gone)
                await response.write_eof()
                return response
            deadline = time.monotonic() + timeout
            for event in backlog:
                await self._deliver(event, selected, send)
            next_bookmark = time.monotonic() + cluster.bookmark_interval
            while True:
                now = time.monotonic()
                if now >= deadline:
                    break
                wait = min(deadline, next_bookmark) - now
                try:
                    event = await asyncio.wait_for(watcher.queue.get(), wait)
                except TimeoutError:
                    if bookmarks and time.monotonic() >= next_bookmark:
                        with cluster.lock:
                            revision = cluster.revision
                        marker = {"metadata": {"resourceVersion": str(revision)}}
                        await send("BOOKMARK", marker)
                        next_bookmark = time.monotonic() + cluster.bookmark_interval
                    continue
                await self._deliver(event, selected, send)
            await response.write_eof()
            return response
        finally:
            with cluster.lock:
                cluster.watchers.discard(watcher)
            self._tasks.discard(task)

    @staticmethod
    async def _deliver(event: _Event, selected: Any, send: Any) -> None:
        was, now = selected(event.old), selected(event.new)
        if event.type == "DELETED":
            if was:
                await send("DELETED", event.new)
        elif now and not was:
            await send("ADDED", event.new)
        elif was and not now:
            await send("DELETED", event.new)
        elif now:
            await send(event.type, event.new)

    # --- the metrics APIs --------------------------------------------------------------------

    def _metrics(self, parts: list[str], query: dict[str, str]) -> web.Response:
        api = "custom" if parts[1] == CUSTOM_METRICS else "external"
        state = self.cluster.metrics_apis[api]
        if state == "absent":
            raise ApiFailure(404, "NotFound", "the server could not find the requested resource")
        if len(parts) == 2:
            versions = [{"groupVersion": f"{parts[1]}/v1beta1", "version": "v1beta1"}]
            return web.json_response(
                {
                    "kind": "APIGroup",
                    "apiVersion": "v1",
                    "name": parts[1],
                    "versions": versions,
                    "preferredVersion": versions[0],
                }
            )
        if state == "down":
            raise ApiFailure(
                503, "ServiceUnavailable", "the server is currently unable to handle the request"
            )
        if parts[2] != "v1beta1":
            raise ApiFailure(404, "NotFound", "the server could not find the requested resource")
        rest = parts[3:]
        if not rest:
            return web.json_response(self._metric_resources(api, parts[1]))
        if api == "external":
            if len(rest) != 3 or rest[0] != "namespaces":
                raise ApiFailure(
                    404, "NotFound", "the server could not find the requested resource"
                )
            return web.json_response(self._external(rest[1], rest[2], query))
        return web.json_response(self._custom(rest, query))

    def _metric_resources(self, api: str, group: str) -> dict[str, Any]:
        if api == "external":
            names = sorted({v["metric"] for v in self.cluster.external_values})
            resources = [
                {
                    "name": n,
                    "singularName": "",
                    "namespaced": True,
                    "kind": "ExternalMetricValueList",
                    "verbs": ["get"],
                }
                for n in names
            ]
        else:
            names = sorted(
                {f"{v.get('resource', 'pods')}/{v['metric']}" for v in self.cluster.custom_values}
            )
            resources = [
                {
                    "name": n,
                    "singularName": "",
                    "namespaced": True,
                    "kind": "MetricValueList",
                    "verbs": ["get"],
                }
                for n in names
            ]
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/v1beta1",
            "resources": resources,
        }

    def _custom(self, rest: list[str], query: dict[str, str]) -> dict[str, Any]:
        # namespaces/<ns>/<resource>/<name|*>/<metric>  or  namespaces/<ns>/metrics/<metric>
        if len(rest) == 4 and rest[0] == "namespaces" and rest[2] == "metrics":
            namespace, resource, name, metric = rest[1], "namespaces", rest[1], rest[3]
        elif len(rest) == 5 and rest[0] == "namespaces":
            namespace, resource, name, metric = rest[1], rest[2], rest[3], rest[4]
        else:
            raise ApiFailure(404, "NotFound", "the server could not find the requested resource")
        metric_labels = label_filter(query.get("metricLabelSelector", ""))
        known = [
            v
            for v in self.cluster.custom_values
            if v["metric"] == metric and v.get("resource", "pods") == resource
        ]
        if not known:
            raise ApiFailure(
                404, "NotFound", f"the server could not find the metric {metric} for {resource}"
            )
        if resource == "pods" and name == "*":
            selector = label_filter(query.get("labelSelector", ""))
            with self.cluster.lock:
                pods = {
                    pod_name
                    for (ns, pod_name), pod in self.cluster.objects["pods"].items()
                    if ns == namespace and selector(pod["metadata"].get("labels") or {})
                }
            chosen = [v for v in known if v["namespace"] == namespace and v["name"] in pods]
        else:
            chosen = [v for v in known if v["namespace"] == namespace and v["name"] == name]
            if not chosen:
                raise ApiFailure(
                    404,
                    "NotFound",
                    f"the server could not find the metric {metric} for {resource} {name}",
                )
        chosen = [v for v in chosen if metric_labels(v.get("labels") or {})]
        kind = {"pods": "Pod", "namespaces": "Namespace"}.get(
            resource, resource.split(".")[0].rstrip("s").title()
        )
        items = [
            {
                "describedObject": {
                    "kind": kind,
                    "namespace": v["namespace"],
                    "name": v["name"],
                    "apiVersion": "/v1",
                },
                "metricName": metric,
                "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "value": str(v["value"]),
                "selector": None,
            }
            for v in chosen
        ]
        return {
            "kind": "MetricValueList",
            "apiVersion": f"{CUSTOM_METRICS}/v1beta1",
            "metadata": {},
            "items": items,
        }

    def _external(self, namespace: str, metric: str, query: dict[str, str]) -> dict[str, Any]:
        known = [v for v in self.cluster.external_values if v["metric"] == metric]
        if not known:
            raise ApiFailure(
                404, "NotFound", f"the server could not find the metric {metric} for namespaces"
            )
        selector = label_filter(query.get("labelSelector", ""))
        items = [
            {
                "metricName": metric,
                "metricLabels": v.get("labels") or {},
                "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "value": str(v["value"]),
            }
            for v in known
            if v["namespace"] == namespace and selector(v.get("labels") or {})
        ]
        return {
            "kind": "ExternalMetricValueList",
            "apiVersion": f"{EXTERNAL_METRICS}/v1beta1",
            "metadata": {},
            "items": items,
        }


def load_world(cluster: FakeCluster, text: str) -> None:
    """Objects, and a ``kubefake: {custom: [...], external: [...], ...}`` document that sets
    what the metrics APIs serve (and ``version: "1.34"``, ``crd-labels: {<crd>: {...}}``, what
    the server says it runs), from one YAML text (the cluster fixtures' format)."""
    for document in yaml.safe_load_all(text):
        if not isinstance(document, dict):
            continue
        settings = document.get("kubefake")
        if isinstance(settings, dict):
            cluster.custom_values.extend(settings.get("custom") or [])
            cluster.external_values.extend(settings.get("external") or [])
            for api in ("custom", "external"):
                if api + "-api" in settings:
                    cluster.metrics_apis[api] = settings[api + "-api"]
            if "version" in settings:
                major, _, minor = str(settings["version"]).partition(".")
                cluster.version = {
                    "major": major,
                    "minor": minor,
                    "gitVersion": f"v{major}.{minor}.0",
                }
            cluster.crd_labels.update(settings.get("crd-labels") or {})
            continue
        if "apiVersion" in document and "kind" in document:
            cluster.apply(document)
