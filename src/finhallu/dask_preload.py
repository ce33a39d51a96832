"""A Dask worker preload (`dask worker --preload finhallu.dask_preload`; the local cluster of
`finhallu build --runner dask` uses it): imports what the partitioned work runs on while the
build's first stages run, so the first partitions do not wait for the imports."""

import finhallu.detectors.grounding  # noqa: F401
import finhallu.fanout  # noqa: F401
import finhallu.stages.metrics  # noqa: F401
