"""``gpulint replay``: what an autoscaler would have done on the load it really saw.

``controller`` models the Kubernetes HPA controller and KEDA's activation, ``demand`` rescales
the observed load to the simulated replicas, ``simulate`` runs the two over a series,
``figures`` measures the result, ``history`` fetches the series from Prometheus and
``render`` writes text, JSON, SVG, HTML and Markdown.
"""
