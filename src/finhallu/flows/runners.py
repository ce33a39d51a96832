"""Where a build's Prefect tasks run: in the build's own process (the default), or on a Dask
cluster through prefect-dask's DaskTaskRunner (`finhallu build --runner dask`).

On Dask, the stages still run one after another in the build process (they publish to the
home's warehouse, one writer); the pure per-item work inside them (finhallu.fanout) runs as
Prefect task runs on the cluster's workers. `--dask-address tcp://host:8786` uses a running
cluster (its workers must import finhallu; `dask worker --preload finhallu.dask_preload` imports
it at start); without it, a local cluster
of `--dask-workers` single-threaded worker processes (default: one per core) lives for the build.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

RUNNERS = ("local", "dask")


@dataclass(frozen=True)
class RunnerSpec:
    kind: str = "local"
    address: str | None = None  # a running Dask scheduler (tcp://...)
    workers: int | None = None  # local cluster size (default: the machine's cores)

    def __post_init__(self) -> None:
        if self.kind not in RUNNERS:
            raise ValueError(f"runner must be one of {', '.join(RUNNERS)}, got {self.kind!r}")
        if self.kind != "dask" and (self.address or self.workers):
            raise ValueError("--dask-address and --dask-workers need --runner dask")
        if self.address and self.workers:
            raise ValueError("--dask-workers sizes a local cluster; a cluster at --dask-address has its own workers")
        if self.workers is not None and self.workers < 1:
            raise ValueError(f"--dask-workers must be at least 1, got {self.workers}")

    def problem(self) -> str | None:
        """One line on why the cluster at `address` cannot take the build (checked before any work);
        None when it can, or when there is no address to check."""
        if not self.address:
            return None
        import socket
        from urllib.parse import urlsplit

        parts = urlsplit(self.address if "://" in self.address else f"tcp://{self.address}")
        if parts.scheme == "tcp":  # a closed port is refused at once; the client would retry for 30 s
            try:
                socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 8786), timeout=30).close()
            except OSError as exc:
                return f"no Dask scheduler at {self.address}: {exc}"
        from distributed import Client

        try:
            with Client(self.address, timeout="60s", set_as_default=False) as client:
                workers = len(client.nthreads())
        except (OSError, TimeoutError) as exc:
            return f"no Dask scheduler at {self.address}: {exc}"
        return None if workers else f"the Dask cluster at {self.address} has no workers"

    def task_runner(self):
        """The flow's task runner (None: Prefect's default, in process)."""
        if self.kind == "local":
            return None
        from prefect_dask import DaskTaskRunner

        if self.address:
            return DaskTaskRunner(address=self.address)
        return DaskTaskRunner(
            cluster_kwargs={
                "n_workers": self.workers or os.cpu_count() or 1,
                "threads_per_worker": 1,  # the work holds the GIL: parallel in processes, not threads
                "processes": True,
                "dashboard_address": None,
                "preload": ["finhallu.dask_preload"],  # the workers import the partitioned work's code at start
            }
        )
