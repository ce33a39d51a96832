"""The report at laptop width: headless Chromium loads a build's report at 1280 px and measures every
table and plot; prints those that would be cut (wider than the page without a scrollbar of their
own) and writes a screenshot beside it.

    .venv/bin/python benchmarks/report_width.py HOME [--width 1280] [--chromium /usr/bin/chromium]

Needs Chromium (Debian: `apt-get install chromium`); nothing is fetched. Target: 0 cut tables, and
ROC/PR plots at least 400 px wide with tick labels.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# Runs in the page: for each table, whether its content is wider than what the page shows and it
# cannot scroll (overflow visible); the plots' rendered widths and tick labels.
_PROBE = """<script>
window.addEventListener('load', () => {
  const vw = document.documentElement.clientWidth;
  const tables = [...document.querySelectorAll('table')].map((t, i) => {
    const r = t.getBoundingClientRect(), style = getComputedStyle(t);
    const scrolls = ['auto', 'scroll'].includes(style.overflowX);
    return {i, right: Math.round(r.right), scroll: t.scrollWidth, client: t.clientWidth,
            cut: (r.right > vw + 1) || (t.scrollWidth > t.clientWidth + 1 && !scrolls)};
  });
  const plots = [...document.querySelectorAll('svg')].map(s => ({width: Math.round(s.getBoundingClientRect().width),
                                                                ticks: s.querySelectorAll('text').length}));
  const out = document.createElement('pre'); out.id = 'width-probe';
  out.textContent = JSON.stringify({viewport: vw, tables, plots, page: document.documentElement.scrollWidth});
  document.body.appendChild(out);
});
</script>"""


def measure(report: Path, width: int, chromium: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "report.html"
        page.write_text(report.read_text(encoding="utf-8").replace("</body>", _PROBE + "</body>"), encoding="utf-8")
        flags = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={tmp}/profile",
            f"--window-size={width},1000",
            "--virtual-time-budget=5000",
        ]
        dom = subprocess.run([chromium, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120).stdout
        shot = report.with_name(f"screenshot-{width}.png")
        subprocess.run([chromium, *flags, f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=120)
    m = re.search(r'<pre id="width-probe">(.*?)</pre>', dom, re.S)
    if not m:
        raise SystemExit(f"{report}: Chromium returned no measurement")
    data = json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    data["screenshot"] = str(shot)
    return data


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("home", type=Path)
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser") or "")
    args = ap.parse_args()
    if not args.chromium:
        sys.exit("report_width: no Chromium found (Debian: apt-get install chromium)")
    reports = sorted((args.home / "reports").glob("*/index.html"), key=lambda p: p.stat().st_mtime)
    if not reports:
        sys.exit(f"report_width: no report under {args.home / 'reports'}")
    data = measure(reports[-1], args.width, args.chromium)
    cut = [t for t in data["tables"] if t["cut"]]
    print(f"{reports[-1]} at {args.width} px: viewport {data['viewport']} px, page {data['page']} px wide")
    print(f"  tables: {len(data['tables'])}, cut: {len(cut)}" + "".join(f"\n    table {t['i']}: {t}" for t in cut))
    print("  plots: " + ", ".join(f"{p['width']} px ({p['ticks']} labels)" for p in data["plots"]))
    print(f"  screenshot: {data['screenshot']}")


if __name__ == "__main__":
    main()
