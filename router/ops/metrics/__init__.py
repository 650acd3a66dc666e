"""Prometheus metrics: the router's own families and the workers' counters, at ``/metrics``."""
