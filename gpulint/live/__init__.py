"""Live checks against a real Prometheus: series, label mapping, rendered adapter queries,
and the queries of KEDA prometheus triggers as KEDA sends them.

* ``options``: what the user asked (URL, headers, timeout, look-back);
* ``collector``: plans and sends the requests, fills a ``snapshot`` on ``inventory.live``;
* ``client``: the HTTP API through prometheus-api-client, within one deadline;
* ``snapshot``, ``series``, ``adapterquery``, ``kedaquery``, ``names``, ``scale``, ``words``:
  pure values and helpers the live rules (GL801-GL812) read.

Only ``collector``, ``client`` and ``workers`` load an HTTP client, and only with
``--prometheus``.
"""
