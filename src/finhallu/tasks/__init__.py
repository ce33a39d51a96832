"""Pure stage logic (no Prefect): one module per stage, registries for sources, injectors, detectors."""
