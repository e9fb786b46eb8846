"""GPU nodes under the replayed pods, and what their time costs.

``--node-ready-after``: the target's pods run on a pool of GPU nodes of ``--gpus-per-node``
GPUs. The pool starts with the nodes the history's pods filled; a new pod takes a free GPU
when there is one, else it is pending until a node the cluster autoscaler adds is ready
(``--node-ready-after`` after the pod asked for it), at most ``--max-nodes`` nodes. A pending
pod then still needs ``pod_ready_after_s`` to serve (image pull, model load), from the time its
node is ready. A node with no pod left is removed after 10 minutes (cluster-autoscaler's
``--scale-down-unneeded-time`` default, kubernetes/autoscaler FAQ.md), so a scale-up soon
after a scale-down finds it still there.

Pods are placed in order (the scheduler binds pending pods first come, first served): a pod
created later never serves before one created earlier. Nothing is kept per node or per pod:
the nodes are a count of ready ones and batches of those on their way, so a pool of a
million nodes costs what one does.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

# cluster-autoscaler --scale-down-unneeded-time: 10m
NODE_UNNEEDED_S = 600.0


@dataclass(frozen=True)
class NodeOptions:
    """``--node-ready-after``, ``--gpus-per-node`` and ``--max-nodes``."""

    ready_after_s: float
    gpus_per_node: int = 8
    max_nodes: int | None = None


class NodePool:
    """The nodes one target's pods run on, as the replay creates and removes pods."""

    __slots__ = ("_coming", "_options", "_per_node", "_unneeded_since", "pods", "ready")

    def __init__(self, options: NodeOptions, gpus_per_pod: int, pods: int) -> None:
        self._options = options
        # A pod that asks for no GPU is scheduled elsewhere: it never waits for a GPU node.
        self._per_node = options.gpus_per_node // gpus_per_pod if gpus_per_pod > 0 else 0
        self.pods = pods
        self.ready = self._needed(pods)  # the history's pods ran on nodes that existed
        self._coming: deque[list[float]] = deque()  # [ready time, nodes], in time order
        self._unneeded_since: float | None = None

    @property
    def fits(self) -> bool:
        """Whether one pod fits on a node at all (and asks for a GPU)."""
        return self._per_node > 0

    def _needed(self, pods: int) -> int:
        return math.ceil(pods / self._per_node) if self._per_node else 0

    def _coming_count(self) -> int:
        return sum(int(batch[1]) for batch in self._coming)

    def advance(self, now: float) -> None:
        """Nodes whose ready time has come join the pool; nodes unneeded for
        ``NODE_UNNEEDED_S`` leave it."""
        coming = self._coming
        while coming and coming[0][0] <= now:
            self.ready += int(coming.popleft()[1])
        needed = self._needed(self.pods)
        if self.ready <= needed:
            self._unneeded_since = None
        elif self._unneeded_since is None:
            self._unneeded_since = now
        elif now - self._unneeded_since >= NODE_UNNEEDED_S:
            self.ready, self._unneeded_since = needed, None

    def queued(self) -> int:
        """Pods waiting for a node."""
        if not self._per_node:
            return 0
        return max(0, self.pods - self.ready * self._per_node)

    def add(self, count: int, now: float) -> list[tuple[float, int]]:
        """``count`` new pods: when each gets a GPU, as (time, pods) in order; math.inf for
        those no node will take (the pool at ``--max-nodes``)."""
        if not self._per_node:
            self.pods += count
            return [(now, count)]
        placed: list[tuple[float, int]] = []
        first = self.pods  # the index of the first new pod
        self.pods += count
        free_until = self.ready * self._per_node
        if first < free_until:
            taken = min(count, free_until - first)
            placed.append((now, taken))
            first, count = first + taken, count - taken
        slot = free_until
        for batch in self._coming:
            if not count:
                break
            end = slot + int(batch[1]) * self._per_node
            if first < end:
                taken = min(count, end - first)
                placed.append((batch[0], taken))
                first, count = first + taken, count - taken
            slot = end
        if count:
            nodes = math.ceil(count / self._per_node)
            limit = self._options.max_nodes
            if limit is not None:
                nodes = max(0, min(nodes, limit - self.ready - self._coming_count()))
            if nodes:
                at = now + self._options.ready_after_s
                if self._coming and self._coming[-1][0] == at:
                    self._coming[-1][1] += nodes
                else:
                    self._coming.append([at, float(nodes)])
                taken = min(count, nodes * self._per_node)
                placed.append((at, taken))
                count -= taken
            if count:
                placed.append((math.inf, count))
        return placed

    def remove(self, count: int) -> None:
        self.pods = max(0, self.pods - count)
