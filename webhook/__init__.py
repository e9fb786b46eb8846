"""The validating admission webhook (`gpulint serve`).

* ``server``: start-up (configuration, certificate, cluster caches), the HTTPS listener,
  certificate rotation, graceful shutdown;
* ``app``: ``/validate``, ``/healthz``, ``/readyz``, ``/metrics``, and failing open;
* ``evaluator``: findings for an admitted object (cluster caches or the object alone) and the
  verdict they make;
* ``live``: with ``--prometheus``, the live rules' snapshot, refreshed in the background;
* ``review``: the AdmissionReview envelope, the denial message, warnings within the API
  server's limits;
* ``tls``, ``metrics``, ``logs``, ``options``: the serving certificate, Prometheus metrics,
  JSON-lines logs, the command line.

It is installed as ``gpulint.webhook``; the rules it runs are the CLI's, through
``gpulint.cluster.cache``.
"""
