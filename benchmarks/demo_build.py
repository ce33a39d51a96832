"""Cold build, warm (fully cached) rerun, and their ratio for the demo profile, in a fresh home.

    .venv/bin/python benchmarks/demo_build.py [--keep] [--with-ui]

Each build runs as a user would (`finhallu build`), so times include process start, imports
and the Prefect API: by default the home's warm local API, which the cold build starts (as
`make demo` does) and the warm rerun finds running. With
--with-ui a `finhallu ui` server for the home is running and both builds report to it, as
when someone watches runs in the UI. Targets (2 cores): cold < 120 s, warm < 15 % of cold.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def build(home: Path) -> tuple[float, dict]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "finhallu.cli", "build", "--profile", "demo", "--json", "--home", str(home)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"build failed:\n{proc.stderr[-3000:]}")
    return elapsed, json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1])


def start_ui(home: Path) -> subprocess.Popen:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "finhallu.cli", "ui", "--home", str(home), "--port", str(port)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    for _ in range(240):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=1)
            return proc
        except OSError:
            time.sleep(0.5)
    sys.exit("the UI server did not start")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keep", action="store_true", help="keep the temporary home")
    ap.add_argument("--with-ui", action="store_true", help="run both builds against a running `finhallu ui`")
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="finhallu-bench-"))
    ui = start_ui(home) if args.with_ui else None
    try:
        cold, s1 = build(home)
        warm, s2 = build(home)
    finally:
        if ui:
            os.killpg(ui.pid, 15)
            ui.wait()
        subprocess.run([sys.executable, "-m", "finhallu.cli", "stop-api", "--home", str(home)], capture_output=True, cwd=ROOT)
    assert s2["ran"] == [], f"warm rerun was not fully cached: ran {s2['ran']}"
    mode = "running finhallu ui" if ui else "home's local API (started by the cold build)"
    print(f"mode:                 {mode}")
    print(f"cpu cores:            {os.cpu_count()}")
    print(f"cold build:           {cold:7.2f} s  ({len(s1['ran'])} stages ran; in-process {s1['seconds']:.2f} s)")
    print(f"warm rerun:           {warm:7.2f} s  ({len(s2['cached'])} stages cached; in-process {s2['seconds']:.2f} s)")
    print(f"warm / cold:          {100 * warm / cold:7.1f} %   (target < 15 %; cold target < 120 s)")
    if not args.keep:
        shutil.rmtree(home, ignore_errors=True)
    else:
        print(f"home:                 {home}")


if __name__ == "__main__":
    main()
