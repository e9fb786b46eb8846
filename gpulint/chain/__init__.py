"""The scrape chain: dcgm-exporter, monitors, Prometheus, prometheus-adapter."""
