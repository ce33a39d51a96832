"""Label integrity of a built benchmark: what injection QC's label verifier kept and dropped, per
type/subtype and reason, and a re-check of every published pair from the warehouse.

    .venv/bin/python benchmarks/label_audit.py HOME [HOME ...]
    .venv/bin/python benchmarks/label_audit.py --build demo --build examples/shared-fixtures.yaml

--build PROFILE builds that profile into a fresh temporary home first (offline, as `make demo`).
Targets: 0 published pairs failing the re-check; a non-zero share dropped by QC (a QC that
passes everything is a defect).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from finhallu.labelcheck.audit import audit_samples  # noqa: E402


def report(home: Path) -> int:
    con = duckdb.connect(str(home / "warehouse.duckdb"), read_only=True)
    qc = con.execute("""SELECT i.hallu_type || coalesce('/' || i.hallu_subtype, '') AS leaf, q.verified, q.passed,
                               q.verify_reasons
                        FROM injections i JOIN injection_qc q USING (injection_id)""").fetchall()
    by_leaf: dict[str, Counter] = {}
    reasons: Counter = Counter()
    for leaf, verified, passed, why in qc:
        c = by_leaf.setdefault(leaf, Counter())
        c["generated"] += 1
        c["verified"] += bool(verified)
        c["passed_qc"] += bool(passed)
        for r in why or []:
            reasons[f"{leaf} | {r[:90]}"] += 1
    print(f"\n== {home}")
    print(f"{'leaf':45} {'generated':>9} {'verified':>9} {'passed QC':>9}")
    for leaf, c in sorted(by_leaf.items()):
        print(f"{leaf:45} {c['generated']:9d} {c['verified']:9d} {c['passed_qc']:9d}")
    total = sum(c["generated"] for c in by_leaf.values())
    kept = sum(c["verified"] for c in by_leaf.values())
    print(f"label verifier dropped {total - kept} of {total} injections ({(total - kept) / max(1, total):.1%})")
    for r, n in reasons.most_common(15):
        print(f"  {n:3d}  {r}")
    audit = audit_samples(
        con.sql("SELECT * FROM samples").pl(), con.sql("SELECT * FROM injections").pl(), con.sql("SELECT * FROM turns").pl()
    )
    failed = audit.filter(~audit["ok"])
    print(f"re-check of published samples: {audit.height} checked, {failed.height} failing")
    for r in failed.head(10).iter_rows(named=True):
        print("  FAIL", r["label"], r["reasons"][:2])
    con.close()
    return failed.height


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("homes", nargs="*", type=Path)
    ap.add_argument("--build", action="append", default=[], help="profile to build into a fresh home first")
    args = ap.parse_args()
    homes = list(args.homes)
    for profile in args.build:
        home = Path(tempfile.mkdtemp(prefix="label-audit-"))
        subprocess.run(
            [str(ROOT / ".venv/bin/finhallu"), "build", "--profile", profile, "--home", str(home)],
            check=True,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
        )
        homes.append(home)
    return 1 if sum(report(h) for h in homes) else 0


if __name__ == "__main__":
    sys.exit(main())
