"""Thin Prefect flows over the pure stages in `finhallu.stages`."""
