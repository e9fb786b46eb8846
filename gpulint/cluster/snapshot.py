"""What cluster mode learned beyond the objects: the metrics APIs' answers for each HPA.

``gpulint.cluster.metrics`` asks the custom and external metrics APIs exactly what the HPA
controller would ask, and stores the answers here, on ``inventory.cluster``; GL901 only reads
them. Nothing here talks to the network.
"""

from __future__ import annotations

from typing import NamedTuple

# The outcomes of one question to a metrics API.
SERVED = "served"  # values came back
EMPTY = "empty"  # the metric exists, but no value for these objects
NOT_FOUND = "not-found"  # 404: the API does not know the metric
NO_API = "no-api"  # no APIService serves custom.metrics.k8s.io (or external.metrics.k8s.io)
UNAVAILABLE = "unavailable"  # the APIService is registered, but its backend does not answer
FORBIDDEN = "forbidden"  # gpulint's credentials may not ask: nothing is known
FAILED = "failed"  # another error: nothing is known
SKIPPED = "skipped"  # gpulint could not form the HPA's question (target not in the cluster)

BROKEN = (EMPTY, NOT_FOUND, NO_API, UNAVAILABLE)
CUSTOM_GROUP = "custom.metrics.k8s.io"
EXTERNAL_GROUP = "external.metrics.k8s.io"


class MetricProbe(NamedTuple):
    """The answer to the question an HPA asks for one of its metrics."""

    api: str  # custom | external
    metric: str  # the name as the HPA writes it
    request: str  # the path and query, as ``kubectl get --raw`` takes it ("" when not asked)
    outcome: str
    detail: str  # what the API said, or why gpulint did not ask
    values: int  # how many values came back
    subject: str  # "the pods of Deployment triton (app=triton)", "Service gpu/queue" ...

    @property
    def broken(self) -> bool:
        """The HPA cannot read this metric: it gets the same answer."""
        return self.outcome in BROKEN


class ClusterSnapshot:
    """The cluster as cluster mode read it."""

    __slots__ = ("apis", "endpoints_read", "notes", "probes", "server", "states")

    def __init__(
        self,
        server: str,
        states: dict[str, str] | None = None,
        apis: dict[str, str] | None = None,
        probes: dict[tuple[str, str, int], MetricProbe] | None = None,
        notes: list[str] | None = None,
    ) -> None:
        self.server = server
        self.states: dict[str, str] = {} if states is None else states  # stream -> state
        self.apis: dict[str, str] = {} if apis is None else apis  # custom/external -> outcome
        self.probes: dict[tuple[str, str, int], MetricProbe] = {} if probes is None else probes
        self.notes: list[str] = [] if notes is None else notes
        # (namespace, name) of the Services whose endpoints were read (gpulint.cluster.endpoints)
        self.endpoints_read: set[tuple[str, str]] = set()

    def __repr__(self) -> str:
        return f"ClusterSnapshot({self.server!r}, {len(self.probes)} probes)"

    def probe(self, namespace: str | None, name: str, index: int) -> MetricProbe | None:
        """The answer for metric ``index`` of the HPA ``namespace/name``; None when gpulint
        did not ask."""
        return self.probes.get((namespace or "", name, index))
