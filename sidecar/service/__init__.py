"""Wiring: the pipeline runner, HTTP (health, metrics, status) and the health state."""
