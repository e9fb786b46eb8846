"""``gpulint migrate keda``: HPAs served by prometheus-adapter rewritten as KEDA ScaledObjects
(``lowering``), written where each HPA came from (``placement``, ``writing``), and proved by
replaying both over the same history (``proof``)."""
