"""``gpulint trace``: the chain from a GPU workload to the autoscaler, link by link.

For every autoscaler metric of a unit (HPA Pods/Object/External metrics, KEDA ``prometheus``
triggers, Knative and KServe revisions on an HPA-class custom metric, KServe components on
KEDA's prometheus backend), ``chain.traces`` walks the same inventory the rules judged:
workload -> exporter -> service -> scrape -> prometheus -> adapter-rule -> metrics-api ->
autoscaler. Each link names its object and where it is written, and is ``ok``, ``broken``
(with the rule IDs whose findings break it) or ``unknown`` (not in the input; the detail says
what would tell: the file to add, ``--prometheus``, ``--cluster``). ``render`` writes the
traces as text, JSON or Mermaid flowcharts.
"""
