"""finhallu command line: build | stages | evaluate | eval-external | ui | report | export | status.

Prefect settings are put in place before Prefect is imported: cache records and the local
run history live under the home folder, telemetry is off, logs stay quiet unless -v.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    import duckdb
    from pydantic_core import ErrorDetails


def _home(args) -> Path:
    """The home's local folder; a home given as a URL (s3://bucket/prefix) is checked once (in
    `main`) and stands for its state folder there (warehouse/storage.py)."""
    if getattr(args, "home_dir", None) is None:
        from finhallu.warehouse.storage import resolve_home

        args.home_dir = resolve_home(args.home or os.environ.get("FINHALLU_HOME") or "data")
    return args.home_dir


def prepare_prefect_env(home: Path, verbose: bool = False) -> None:
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    if "PREFECT_API_URL" not in os.environ:
        # Ephemeral runs and `finhallu ui` share one run database under the home folder.
        (home / "prefect").mkdir(parents=True, exist_ok=True)
        os.environ.setdefault("PREFECT_HOME", str(home / "prefect"))
    # Run logs reach the API (the UI) at INFO (stage summaries); the console shows warnings unless -v.
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "INFO")
    os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "INFO" if verbose else "WARNING")


class RichReporter:
    def __init__(self, progress) -> None:
        self.progress = progress
        self.tasks: dict[str, int] = {}

    def stage_started(self, stage: str) -> None:
        self.tasks[stage] = self.progress.add_task(stage, total=None)

    def stage_progress(self, stage: str, done: int, total: int) -> None:
        if stage in self.tasks:
            self.progress.update(self.tasks[stage], completed=done, total=total)

    def stage_finished(self, stage: str, status: str) -> None:
        if stage in self.tasks:
            t = self.tasks[stage]
            self.progress.update(t, description=f"{stage} [{status}]", completed=1, total=1)

    def note(self, message: str) -> None:
        self.progress.console.print(message, highlight=False, soft_wrap=True)


@contextlib.contextmanager
def prefect_api(home: Path):
    """Where runs are reported: PREFECT_API_URL if set, else a running `finhallu ui` for this home,
    else the home's warm local API (started now if needed: it boots while the caller imports)."""
    from finhallu.service.local_api import HomeAPI, running_ui_url

    api = None
    if "PREFECT_API_URL" not in os.environ:
        ui = running_ui_url(home)
        if ui:
            os.environ["PREFECT_API_URL"] = ui
        else:
            api = HomeAPI(home).ensure()
    with contextlib.ExitStack() as settings:

        def ready(while_booting: Callable[[], object] | None = None) -> None:
            """Runs report to the warm API from here on (called once the caller has imported the flows).
            `while_booting`: work the run needs anyway, done while a server started now boots
            (the wait is ~4 s of an idle process otherwise)."""
            if api is None:
                return
            if while_booting is not None and api.booting:
                while_booting()
            url = api.url()
            os.environ["PREFECT_API_URL"] = url
            if "prefect" in sys.modules:
                # Prefect read its settings when it was imported (before the server was up): without
                # this the run starts an ephemeral server of its own (~4-7 s on every run).
                from prefect.settings import PREFECT_API_URL, temporary_settings

                settings.enter_context(temporary_settings(updates={PREFECT_API_URL: url}))

        try:
            yield ready
        finally:
            if api:
                if "prefect" in sys.modules:  # deliver queued run logs
                    from prefect.logging.handlers import APILogHandler

                    APILogHandler().flush()
                api.release()


def _validation_line(err: ErrorDetails) -> str:
    where = ".".join(str(p) for p in err["loc"]) or "profile"
    if err["type"] == "extra_forbidden":
        return f"{where}: unknown setting"
    got = "" if isinstance(err["input"], (dict, list)) else f" (got {err['input']!r})"
    return f"{where}: {err['msg']}{got}"


def _scalar(con: duckdb.DuckDBPyConnection, sql: str) -> Any:
    """The value of a one-row query (an aggregate without GROUP BY)."""
    row = con.execute(sql).fetchone()
    assert row is not None, "an aggregate query returns one row"
    return row[0]


def checked_config(profile: str, sets: list[str] | None = None, detectors: list[str] | None = None, extra: dict | None = None):
    """(the profile loaded once, with its `--set` overrides, None) or (None, what is wrong in one line).
    Checked before any work starts (no API server, no lock, no stage)."""
    import yaml
    from pydantic import ValidationError

    from finhallu.config import load_config, merge_dicts, parse_override

    try:
        overrides: dict = dict(extra or {})
        for expr in sets or []:
            overrides = merge_dicts(overrides, parse_override(expr))
        cfg = load_config(profile, overrides or None)
    except ValidationError as exc:
        return None, "; ".join(_validation_line(e) for e in exc.errors())
    except (FileNotFoundError, ValueError, yaml.YAMLError) as exc:
        return None, " ".join(str(exc).split())
    if cfg.injection_qc.verify_labels and cfg.injection_qc.verifier_nli_model:
        from finhallu.nli_model import missing_model

        problem = missing_model(cfg.injection_qc.verifier_nli_model)
        if problem:
            return None, f"injection_qc.verifier_nli_model: {problem}"
    problem = detectors_problem(cfg.detect.detectors, only=detectors)
    return (None, problem) if problem else (cfg, None)


def detectors_problem(configured: dict[str, dict], only: list[str] | None = None) -> str | None:
    """The first detector that cannot run (unknown name or parameter, missing local model)."""
    from finhallu.detectors import detector_problem

    for name in only or sorted(configured):
        problem = detector_problem(name, configured.get(name, {}))
        if problem:
            return f"detect.detectors.{name}: {problem}"
    return None


def samples_problem(home: Path, dataset_version: int | None) -> str | None:
    """What keeps `evaluate` from starting besides its config: no samples, or not that version."""
    from finhallu.warehouse import TableStore

    store = TableStore(home)
    versions = [r["version"] for r in store.records("samples")]
    if not versions:
        return f"no samples published in {home}; run `finhallu build` first"
    if dataset_version is not None and dataset_version not in versions:
        return f"samples version {dataset_version} is not published (published: {versions})"
    return None


def cmd_build(args) -> int:
    # --retry-failed sends the calls recorded as failed again (llm.retry_failed)
    cfg, problem = checked_config(
        args.profile, args.set, extra={"llm": {"retry_failed": True}} if getattr(args, "retry_failed", False) else None
    )
    if problem:
        print(f"finhallu {args.command}: bad configuration: {problem}", file=sys.stderr)
        return 2
    if getattr(args, "dry_run", False):
        return _dry_run(args, cfg)
    from finhallu.flows.runners import RunnerSpec

    try:
        runner = RunnerSpec(args.runner, args.dask_address, args.dask_workers)
    except ValueError as exc:
        print(f"finhallu {args.command}: {exc}", file=sys.stderr)
        return 2
    problem = runner.problem()
    if problem:
        print(f"finhallu {args.command}: not started: {problem}", file=sys.stderr)
        return 2
    # The collector waits for the build's imports and warm-up (~0.4 s of full passes over a heap
    # that is all modules, on the start's critical path); what they made is then frozen out of its
    # reach for the build (thawed after it, for a caller in the same process).
    gc.disable()
    try:
        with prefect_api(_home(args)) as ready:
            return _build(args, cfg, ready, runner)
    finally:
        gc.enable()
        gc.unfreeze()


def _dry_run(args, cfg) -> int:
    from finhallu.estimate import dry_run

    est = dry_run(cfg, progress=None if args.json else lambda stage: print(f"dry run: {stage}", file=sys.stderr))
    print(json.dumps(est.to_json(), ensure_ascii=False) if args.json else est.table())
    return 0


def cmd_evaluate(args) -> int:
    cfg, problem = checked_config(args.profile, None, args.detector)
    problem = problem or samples_problem(_home(args), args.dataset_version)
    if problem:
        print(f"finhallu evaluate: {problem}", file=sys.stderr)
        return 2
    with prefect_api(_home(args)) as ready:
        from finhallu.flows.evaluate import run_evaluate

        from finhallu.llm.errors import MissingKeyError

        ready()
        try:
            out = run_evaluate(
                _home(args),
                profile=cfg,
                dataset_version=args.dataset_version,
                detectors=args.detector,
                wait_s=args.wait,
                make_current=args.make_current,
            )
        except MissingKeyError as exc:
            print(f"evaluate: not started: {exc}", file=sys.stderr)
            return 2
    print(json.dumps(out, ensure_ascii=False))
    return 0


def cmd_probe(args) -> int:
    extra = {"probe_responses": {"targets": args.target}} if args.target else None
    cfg, problem = checked_config(args.profile, args.set, extra=extra)
    if cfg is not None:
        from finhallu.flows.probe import probe_roles_problem

        problem = probe_roles_problem(cfg)
    if problem or cfg is None:
        print(f"finhallu probe: bad configuration: {problem}", file=sys.stderr)
        return 2
    from finhallu.flows.probe import check_probe_keys
    from finhallu.llm.errors import MissingKeyError

    try:
        check_probe_keys(cfg)  # before the API server starts or anything runs
    except MissingKeyError as exc:
        print(f"probe: not started: {exc}", file=sys.stderr)
        return 2
    with prefect_api(_home(args)) as ready:
        from finhallu.flows.probe import run_probe

        ready()
        out = run_probe(cfg, _home(args), wait_s=args.wait)
    if args.json:
        print(json.dumps(out, ensure_ascii=False))
    else:
        print(f"probe {out['probe_id']} of {', '.join(out['targets'])}: report {out['report']}")
        print(f"ratings for `finhallu agreement`: {out['ratings']}")
        print("tables: " + ", ".join(out["tables"].values()))
    return 0


def cmd_eval_external(args) -> int:
    cfg, problem = checked_config(args.profile, None, args.detector)
    if not problem and args.train_on:
        from finhallu.detectors import detector_problem

        problem = detector_problem("learned", {"train_on": args.train_on})
    if problem:
        print(f"finhallu eval-external: {problem}", file=sys.stderr)
        return 2
    with prefect_api(_home(args)) as ready:
        from finhallu.flows.external import run_eval_external

        from finhallu.llm.errors import MissingKeyError

        ready()
        try:
            out = run_eval_external(
                _home(args),
                args.format,
                args.path,
                detectors=args.detector,
                profile=cfg,
                dataset=args.name,
                limit=args.limit,
                wait_s=args.wait,
                train_on=args.train_on,
            )
        except (FileNotFoundError, ValueError, MissingKeyError) as exc:  # unreadable input (names the record), or no key
            print(f"eval-external: {exc}", file=sys.stderr)
            return 2
    if args.json:
        print(json.dumps(out, ensure_ascii=False))
        return 0
    print(f"{out['dataset']} @ {out['dataset_version']}: {out['samples']} samples {out['splits']} (eval {out['eval_id']})")
    for det, slices in sorted(out["metrics"].items()):
        for sl, m in sorted(slices.items()):
            cells = [f"{k.replace('binary_', '')} {v['value']:.3f}" for k, v in m.items() if k.startswith("binary_")]
            print(f"  {det:<28} {sl:<11} " + "  ".join(cells))
    print(f"report: {out['report']}")
    return 0


def _warm_up(cfg, prepare_gates: Callable[[], object]) -> None:
    """What a build needs anyway, done while a server started for it boots (~3.2 s idle otherwise):
    Great Expectations' import and context (~2.2 s), Kiwi where a source is Korean (~2.3 s, all of
    it holding the GIL: loaded by the first Korean stage it delayed that stage's first LLM call),
    and the SDKs of the remote roles (~0.4 s each, which delayed the first call as much) and their
    clients.
    A build whose gates run in a worker process (flows/gate_worker.py) leaves Great Expectations to
    it, started last: its import on a third process took the two cores from the server's boot and
    Kiwi's load, and the build's start went 4.0 -> 5.2 s (demo LLM path); its first gate comes a
    stage later."""
    from finhallu.estimate import called_remote_roles
    from finhallu.flows.build import overlap_gates
    from finhallu.llm.providers import get_provider
    from finhallu.sources import get_loader

    overlap = overlap_gates(cfg)
    if not overlap:
        prepare_gates()
    if any("ko" in get_loader(src.kind).langs for src in cfg.ingest.sources):
        import threading

        from finhallu.text import sentences

        # On a thread of its own, as when a stage's thread loaded it: its 0.44 GB then sits in that
        # thread's malloc arena. Loaded on the main thread, a 3,060-document build peaked at 2.86 GB
        # (2.75 without the warm-up, 2.63 so).
        loader = threading.Thread(target=sentences.kiwi, name="kiwi-load")
        loader.start()
        loader.join()
    remote = called_remote_roles(cfg)
    for provider in sorted({cfg.roles[role].provider for role in remote}):
        get_provider(provider).import_sdk()
    if remote:
        from finhallu.llm.router import LLMRouter
        from finhallu.llm.runtime import LLMRuntime

        LLMRouter({r: cfg.roles[r].model_dump() for r in remote}, LLMRuntime(cfg.llm)).warm_clients(remote)
    if overlap:
        from finhallu.flows.gate_worker import start_early

        start_early()


def _build(args, cfg, ready, runner) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from finhallu.estimate import has_remote_roles
    from finhallu.flows.build import run_build
    from finhallu.llm.errors import LLMError, MissingKeyError
    from finhallu.llm.parallel import old_objects_frozen
    from finhallu.schemas.gate import prepare_gates
    from finhallu.progress import set_reporter
    from finhallu.warehouse.lock import HomeBusy

    home = _home(args)
    refresh: contextlib.AbstractContextManager[object] = contextlib.nullcontext()
    if cfg.llm.retry_failed:
        # Calls recorded as failed are sent again; for that their stages must run again (not come
        # from Prefect's cache): every stage reruns, every other call is an LLM-cache hit.
        from prefect.settings import PREFECT_TASKS_REFRESH_CACHE, temporary_settings

        refresh = temporary_settings(updates={PREFECT_TASKS_REFRESH_CACHE: True})
    console = Console(stderr=True)
    quiet_llm_stops()
    ready(while_booting=lambda: _warm_up(cfg, prepare_gates))
    gc.freeze()
    gc.enable()
    columns = [SpinnerColumn(), TextColumn("{task.description:<28}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
    try:
        with refresh, Progress(*columns, console=console, transient=False, disable=args.json) as progress:
            set_reporter(RichReporter(progress))
            with old_objects_frozen() if has_remote_roles(cfg) else contextlib.nullcontext():
                outcome = run_build(cfg, home, wait_s=args.wait, until=getattr(args, "stage", None), runner=runner)
    except HomeBusy as exc:
        console.print(f"[red]refused:[/red] {exc}")
        return 3
    except MissingKeyError as exc:  # one line (Rich would wrap it at the terminal's width)
        print(f"finhallu {args.command}: not started: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    except LLMError as exc:  # a rejected key, a spent failure budget, a batch still running: one line, no traceback
        print(f"finhallu {args.command}: stopped: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    finally:
        set_reporter(None)
    if args.json:
        from finhallu.flows.build import summary_json

        print(summary_json(outcome))
    if outcome.status != "succeeded":
        console.print(f"[red]build {outcome.build_id} failed at stage {outcome.failed_stage}[/red]\n{outcome.message}")
        console.print("Nothing of that stage was published; the previous versions stay current. See dq_results in the warehouse.")
        return 2
    if not args.json and getattr(args, "stage", None):
        console.print(
            f"[green]stages up to {args.stage} done[/green] ({len(outcome.stages_run)} ran, "
            f"{len(outcome.stages_cached)} cached): " + ", ".join(f"{r.name}@{r.version}" for r in outcome.refs.values())
        )
    elif not args.json:
        _print_summary(console, home, outcome)
    return 0


class _LLMStopFilter:
    """Keeps Prefect's console lines (and tracebacks) about a build stopped by the LLM layer (a
    rejected key, a spent failure budget, a batch still running) off the console: the build prints
    that as one line. The run's log on the Prefect API keeps them."""

    NAMES = ("KeyRejected", "FailureBudgetExceeded", "BatchPending")

    def filter(self, record) -> bool:
        from finhallu.llm.errors import LLMError

        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, LLMError):
            return False
        try:
            text = record.getMessage()
        except Exception:
            return True
        return not any(n in text for n in self.NAMES)


def quiet_llm_stops() -> None:
    import logging

    from prefect.logging.handlers import PrefectConsoleHandler

    loggers = [logging.getLogger()] + [lg for lg in logging.Logger.manager.loggerDict.values() if isinstance(lg, logging.Logger)]
    for lg in loggers:
        for h in lg.handlers:
            if isinstance(h, PrefectConsoleHandler) and not any(isinstance(f, _LLMStopFilter) for f in h.filters):
                h.addFilter(_LLMStopFilter())


def _print_summary(console, home: Path, outcome) -> None:
    from finhallu.coverage import warnings_from_stats
    from finhallu.warehouse import connect_readonly

    con = connect_readonly(home)
    try:
        labels = con.execute("SELECT split, label_4class, count(*) FROM samples GROUP BY ALL ORDER BY ALL").fetchall()
        types = con.execute(
            "SELECT hallu_type, count(*) FROM samples WHERE hallu_type IS NOT NULL GROUP BY 1 ORDER BY 1"
        ).fetchall()
        quarantined = _scalar(con, "SELECT count(*) FROM quarantine")
        f1 = con.execute(
            "SELECT detector, round(value, 3), round(ci_low, 3), round(ci_high, 3) FROM metrics "
            "WHERE setting='binary' AND slice='all' AND metric='f1' ORDER BY 1"
        ).fetchall()
        warnings = warnings_from_stats(con.sql("SELECT split, metric, slice, value FROM dataset_stats").pl().to_dicts())
    finally:
        con.close()
    console.print(
        f"[green]build {outcome.build_id} succeeded[/green] in {outcome.seconds:.1f}s "
        f"({len(outcome.stages_run)} stages ran, {len(outcome.stages_cached)} cached)"
    )
    console.print("samples by split and label: " + ", ".join(f"{s}/{lab}={n}" for s, lab, n in labels))
    console.print("hallucination types: " + ", ".join(f"{t}={n}" for t, n in types))
    console.print(f"quarantined inputs: {quarantined}")
    for det, v, lo, hi in f1:
        console.print(f"detector {det}: binary F1 {v} [{lo}, {hi}]")
    for w in warnings:
        console.print(f"[yellow]warning:[/yellow] {w}")
    shell = Path(sys.executable).parent / "duckdb"  # the venv's duckdb CLI (not on PATH unless activated)
    console.print(f"warehouse: {shell if shell.exists() else 'duckdb'} -readonly {home / 'warehouse.duckdb'}")
    console.print(f"report:    {outcome.report}")
    if outcome.flow_run_id:
        from finhallu.service.local_api import running_ui_url

        ui = running_ui_url(home)
        console.print(
            f"prefect:   {ui[: -len('/api')]}/runs/flow-run/{outcome.flow_run_id}"
            if ui
            else f"prefect:   run {outcome.flow_run_id} (browse it with `finhallu ui --home {home}`)"
        )


def cmd_stages(args) -> int:
    from finhallu.config import load_config
    from finhallu.stages.pipeline import PROBE_STAGES, STAGES

    load_config(args.profile)
    for title, stages in (("build", STAGES), ("probe (`finhallu probe`)", PROBE_STAGES)):
        print(f"# {title}")
        for s in stages:
            print(f"{s.name:<15} {', '.join(s.inputs) or '-':<70} -> {', '.join(s.outputs)}")
    return 0


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def cmd_ui(args) -> int:
    import signal
    import subprocess

    from finhallu.service.local_api import ui_url_file

    home = _home(args)
    prepare_prefect_env(home)
    url_file = ui_url_file(home)
    print(
        f"Prefect UI on http://127.0.0.1:{args.port} (run history under {os.environ.get('PREFECT_HOME')}); "
        "builds on this home report to it while it runs. Ctrl-C stops it.",
        flush=True,
    )
    proc = subprocess.Popen([sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(args.port)])
    url_file.write_text(f"http://127.0.0.1:{args.port}/api")
    # SIGTERM (a service manager, `kill`) stops the server too instead of orphaning it on the port.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        proc.terminate()
        return proc.wait()
    finally:
        url_file.unlink(missing_ok=True)


def cmd_report(args) -> int:
    """The latest build's report, or one evaluation's (`--eval ID`: an evaluate or eval-external id)."""
    home = _home(args)
    if args.eval:
        path = home / "reports" / args.eval / "index.html"
        if not path.exists():
            known = sorted(p.parent.name for p in (home / "reports").glob("*/index.html"))
            print(f"finhallu report: no report {args.eval!r} (reports: {', '.join(known) or 'none'})", file=sys.stderr)
            return 2
        print(path)
        return 0
    reports = sorted(
        (p for p in (home / "reports").glob("*/index.html") if not p.parent.name.startswith(("eval-", "ext-"))),
        key=lambda p: p.stat().st_mtime,
    )
    if not reports:
        print(f"no build report under {home / 'reports'}; run `finhallu build` first", file=sys.stderr)
        return 1
    print(reports[-1])
    return 0


def cmd_export(args) -> int:
    from finhallu.export import export_files
    from finhallu.warehouse import TableStore

    home = _home(args)
    ref = TableStore(home).current_ref("samples")
    if ref is None:
        print("no published samples table; run `finhallu build` first", file=sys.stderr)
        return 1
    print(export_files(home, ref))
    return 0


def cmd_fetch(args) -> int:
    """Download raw filings into a folder that a profile's ingest.sources paths can name."""
    from finhallu import clients

    try:
        if args.source == "edgar":
            ua = args.user_agent or os.environ.get("SEC_USER_AGENT") or os.environ.get("FINHALLU_SEC_USER_AGENT")
            if not ua:
                print(
                    "SEC requires a User-Agent naming you and a contact email: pass --user-agent "
                    "'Name name@example.com' or set SEC_USER_AGENT",
                    file=sys.stderr,
                )
                return 2
            opts = {"base_url": args.base_url, "archives_url": args.archives_url or args.base_url} if args.base_url else {}
            res = clients.fetch_edgar(
                args.cik,
                ua,
                args.dest,
                forms=tuple(args.form or ["10-K"]),
                limit=args.limit,
                companyfacts=not args.no_facts,
                **opts,
            )
        else:
            opts = {"base_url": args.base_url} if args.base_url else {}
            res = clients.fetch_dart(
                args.corp_code, args.dest, args.begin, args.end, pblntf_ty=args.kind, limit=args.limit, **opts
            )
    except clients.ClientError as exc:  # every client error names URL and status, never the key
        print(f"fetch failed: {exc}", file=sys.stderr)
        return 1
    print(
        json.dumps(
            {"dest": str(res.dest), "documents": [str(p) for p in res.documents], "facts": [str(p) for p in res.facts]},
            ensure_ascii=False,
        )
    )
    return 0


def cmd_stop_api(args) -> int:
    from finhallu.service.local_api import stop_home_api

    print("stopped" if stop_home_api(_home(args)) else "no warm API server for this home")
    return 0


def cmd_agreement(args) -> int:
    """Judge validation (K-FinHallu Table 1): percent agreement and Gwet's AC1 per criterion."""
    from finhallu.agreement import agreement_report, format_report, read_ratings

    try:
        rows = agreement_report(read_ratings(args.ratings), llm_rater=args.llm_rater)
    except (OSError, ValueError) as exc:
        print(f"agreement: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(rows, ensure_ascii=False) if args.json else format_report(rows))
    return 0


def cmd_status(args) -> int:
    from finhallu.warehouse import Catalog

    catalog = Catalog(_home(args))
    builds = catalog.builds()[-args.last :]
    current = catalog.store.current()
    if args.json:
        print(json.dumps({"current": current, "builds": builds}, ensure_ascii=False, indent=1))
        return 0
    print("current tables: " + ", ".join(f"{n}@{v}" for n, v in sorted(current.items())) if current else "no current tables")
    print(f"{'build':<30}{'status':<13}{'started':<22}{'ran':>4}{'cached':>7}  failed stage / report")
    for b in builds:
        tail = b.get("failed_stage") or b.get("report") or ""
        print(
            f"{b['build_id']:<30}{b.get('status') or '':<13}{(b.get('started_at') or '')[:19]:<22}"
            f"{len(b.get('stages_run') or []):>4}{len(b.get('stages_cached') or []):>7}  {tail}"
        )
    return 0


def cmd_llm_stub(args) -> int:
    """Serve the loopback LLM stub (OpenAI + Gemini wire formats) until interrupted."""
    import time

    from finhallu.llm.stub_server import StubLLM

    from finhallu.llm.stub_server import FAULT_KINDS

    kinds = [k.strip() for k in (args.faults or ",".join(FAULT_KINDS)).split(",") if k.strip()]
    unknown = sorted(set(kinds) - set(FAULT_KINDS))
    if unknown or not kinds or not 0.0 <= args.fault_rate <= 1.0:
        print(
            f"finhallu llm-stub: --faults takes {','.join(FAULT_KINDS)} (got {args.faults!r}) and --fault-rate a "
            f"share in [0, 1] (got {args.fault_rate})",
            file=sys.stderr,
        )
        return 2
    stub = StubLLM(
        port=args.port,
        latency_s=args.latency,
        rpm_limit=args.rpm,
        fault_rate=args.fault_rate,
        fault_kinds=tuple(kinds),
        fault_seed=args.seed,
    ).start()
    faults = f"   faults: {args.fault_rate:.0%} of {','.join(kinds)} (seed {args.seed})" if args.fault_rate else ""
    print(f"OpenAI-compatible: {stub.openai_base}   Gemini: {stub.gemini_base}{faults}   (Ctrl-C stops)", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        stub.stop()
        if args.fault_rate:
            print(f"faults injected: {stub.faults_injected}", flush=True)
    return 0


def cmd_sql(args) -> int:
    """A query on the home's current catalog (a fresh read-only connection, so it sees the newest
    versions), or, with no query, the duckdb shell on it."""
    import duckdb

    from finhallu.warehouse import connect_readonly

    from finhallu.warehouse.storage import storage_of

    home = _home(args)
    storage = storage_of(home)
    if not (home / "warehouse.duckdb").exists() and not storage.exists("catalog"):
        print(f"sql: no warehouse in {home} (build first: finhallu build --home {home})", file=sys.stderr)
        return 2
    con = connect_readonly(home)  # re-points the views first if the home was moved
    if not args.query:
        con.close()
        if storage.remote:  # the duckdb shell cannot reach a Python (fsspec) filesystem
            print(f"sql: the tables are at {storage.url('')}: pass a query (finhallu sql 'SELECT ...')", file=sys.stderr)
            return 2
        shell = Path(sys.executable).parent / "duckdb"
        if not shell.exists():
            print("sql: the duckdb shell is not installed beside this Python (pip install duckdb-cli)", file=sys.stderr)
            return 2
        os.execv(str(shell), [str(shell), "-readonly", str(home / "warehouse.duckdb")])
    try:
        cur = con.execute(args.query)
        cols = [d[0] for d in cur.description or []]
        rows = cur.fetchall()
    except duckdb.Error as exc:
        print("sql: " + " ".join(str(exc).split()), file=sys.stderr)
        return 2
    finally:
        con.close()
    if args.json:
        print(json.dumps([dict(zip(cols, r)) for r in rows], ensure_ascii=False, default=str))
    else:
        print(_text_table(cols, rows) if rows else "(no rows)")
    return 0


def _text_table(cols: list[str], rows: list[tuple], max_width: int = 60) -> str:
    cell = lambda v: ("NULL" if v is None else f"{v:.4g}" if isinstance(v, float) else str(v)).replace("\n", " ")[:max_width]  # noqa: E731
    cells = [[cell(v) for v in r] for r in rows]
    widths = [max([len(c)] + [len(r[j]) for r in cells]) for j, c in enumerate(cols)]
    line = lambda vals: "  ".join(v.ljust(w) for v, w in zip(vals, widths)).rstrip()  # noqa: E731
    return "\n".join([line(cols), line(["-" * w for w in widths])] + [line(r) for r in cells])


def cmd_llm_calls(args) -> int:
    """Per-stage LLM calls, cache hits, failures, tokens and cost of the latest (or a given) build."""
    import duckdb

    from finhallu.warehouse import Catalog

    catalog = Catalog(_home(args))
    catalog.refresh_views()
    con = duckdb.connect(str(catalog.db_path), read_only=True)
    try:
        build = args.build or _scalar(con, "SELECT max(build_id) FROM llm_calls")
        rows = con.execute(
            "SELECT stage, role, provider, model, count(*) AS calls, sum(CASE WHEN cache_hit THEN 1 ELSE 0 END) AS cache_hits, "
            "count(error) AS failures, sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens, "
            "round(sum(cost_usd), 4) AS cost_usd FROM llm_calls WHERE build_id = ? "
            "GROUP BY ALL ORDER BY stage, role",
            [build],
        ).fetchall()
    finally:
        con.close()
    cols = ["stage", "role", "provider", "model", "calls", "cache_hits", "failures", "input_tokens", "output_tokens", "cost_usd"]
    print(json.dumps({"build_id": build, "calls": [dict(zip(cols, r)) for r in rows]}, ensure_ascii=False, indent=1))
    return 0


class RegistryChoices:
    """argparse choices read from a registry (or the stage list) only when an argument is checked
    or help is shown, so a command that needs neither never imports the plug-ins."""

    def __init__(self, names) -> None:
        self._names = names
        self._cached: list[str] | None = None

    def _all(self) -> list[str]:
        if self._cached is None:
            self._cached = list(self._names())
        return self._cached

    def __contains__(self, name: object) -> bool:
        return name in self._all()

    def __iter__(self):
        return iter(self._all())


def _stage_names() -> list[str]:
    from finhallu.stages.pipeline import STAGES

    return [s.name for s in STAGES]


def _format_names() -> list[str]:
    from finhallu.external import FORMATS

    return FORMATS.names()


def _build_parsers(add) -> None:
    b = add("build", help="build the benchmark (all stages, cached)")
    sg = add("stage", help="run the DAG up to one stage (cached), e.g. `finhallu stage retrieve`")
    sg.add_argument("stage", help="stage name (see `finhallu stages`)", choices=RegistryChoices(_stage_names))
    for p in (b, sg):
        p.add_argument("--profile", default="demo", help="packaged profile name or a YAML path")
        p.add_argument(
            "--set",
            action="append",
            metavar="KEY=VALUE",
            help="override a config value, e.g. detect.detectors.lexical_support.threshold=0.5",
        )
        p.add_argument(
            "--wait", type=float, default=0.0, metavar="SECONDS", help="wait this long for a running build on the same home"
        )
        p.add_argument("--json", action="store_true", help="print a JSON summary instead of progress")
        p.add_argument(
            "--retry-failed",
            action="store_true",
            help="send LLM calls recorded as failed by earlier builds again (without it a rerun keeps "
            "them as recorded failures, with no request)",
        )
        p.add_argument(
            "--runner",
            choices=("local", "dask"),
            default="local",
            help="where the stages' partitioned work runs: in this process, or on a Dask cluster (prefect-dask)",
        )
        p.add_argument("--dask-address", metavar="tcp://HOST:PORT", help="a running Dask scheduler (with --runner dask)")
        p.add_argument(
            "--dask-workers", type=int, metavar="N", help="workers of the local Dask cluster (with --runner dask; default: cores)"
        )
        p.set_defaults(fn=cmd_build)
    b.add_argument(
        "--dry-run",
        action="store_true",
        help="run nothing: estimate the build's LLM calls, tokens, cost and minimum time per stage",
    )
    s = add("stages", help="list the DAG's stages")
    s.add_argument("--profile", default="demo")
    s.set_defaults(fn=cmd_stages)


def _evaluation_parsers(add) -> None:
    e = add("evaluate", help="run detectors on a published samples version (detect, metrics, report)")
    e.add_argument("--profile", default="demo")
    e.add_argument("--dataset-version", type=int, default=None, help="samples version (default: current)")
    e.add_argument("--detector", action="append", help="detector name (repeatable; default: the profile's)")
    e.add_argument("--wait", type=float, default=0.0)
    e.add_argument(
        "--make-current",
        action="store_true",
        help="make this evaluation's results the plain views' (default: added beside the build's)",
    )
    e.set_defaults(fn=cmd_evaluate)
    x = add("eval-external", help="run detectors on an external labelled dataset (RAGTruth, HaluEval, JSONL/CSV)")
    x.add_argument("--format", required=True, choices=RegistryChoices(_format_names))
    x.add_argument(
        "--path",
        required=True,
        help="the dataset's file or folder (RAGTruth: the folder of response.jsonl and source_info.jsonl)",
    )
    x.add_argument("--detector", action="append", help="detector name (repeatable; default: the profile's)")
    x.add_argument("--name", help="dataset name recorded in the results (default: the format's)")
    x.add_argument("--limit", type=int, help="read only the first N samples")
    x.add_argument(
        "--train-on",
        metavar="FORMAT:PATH",
        help="a labelled set (any --format) the learned detector also trains on, every row of it",
    )
    x.add_argument("--profile", default="demo", help="profile whose detector parameters and LLM roles apply")
    x.add_argument("--wait", type=float, default=0.0)
    x.add_argument("--json", action="store_true", help="print the result as JSON")
    x.set_defaults(fn=cmd_eval_external)
    pr = add("probe", help="false-premise probe (HalBench method) of target roles over the corpus")
    pr.add_argument("--profile", default="demo", help="packaged profile name or a YAML path")
    pr.add_argument(
        "--target",
        action="append",
        metavar="ROLE",
        help="a configured role to probe (repeatable; default: the profile's probe_responses.targets)",
    )
    pr.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config value")
    pr.add_argument("--wait", type=float, default=0.0)
    pr.add_argument("--json", action="store_true", help="print the result as JSON")
    pr.set_defaults(fn=cmd_probe)
    ag = add("agreement", help="percent agreement and Gwet's AC1 of human (and LLM judge) ratings, per criterion")
    ag.add_argument("ratings", help="CSV with columns item_id,criterion,rater,rating (see README)")
    ag.add_argument("--llm-rater", default="llm", help="the rater name of the LLM judge (default: llm)")
    ag.add_argument("--json", action="store_true", help="print JSON rows instead of a table")
    ag.set_defaults(fn=cmd_agreement)


def _fetch_parser(add) -> None:
    f = add("fetch", help="download filings from EDGAR or OpenDART into a folder for a profile's sources")
    fsub = f.add_subparsers(dest="source", required=True)
    fe = fsub.add_parser("edgar", help="10-K primary documents (+ companyfacts JSON) of one company")
    fe.add_argument("--cik", required=True)
    fe.add_argument("--user-agent", help="'Name email' as SEC requires (or $SEC_USER_AGENT)")
    fe.add_argument("--form", action="append", help="form type (repeatable; default 10-K)")
    fe.add_argument("--no-facts", action="store_true", help="skip the companyfacts JSON")
    fe.add_argument("--archives-url", help="archives host when --base-url points at a mirror")
    fd = fsub.add_parser("dart", help="DART document XML of one company (key: $OPENDART_API_KEY or Prefect Secret)")
    fd.add_argument("--corp-code", required=True)
    fd.add_argument("--begin", required=True, help="YYYYMMDD")
    fd.add_argument("--end", required=True, help="YYYYMMDD")
    fd.add_argument("--kind", default="A", help="pblntf_ty (A = periodic reports)")
    for p in (fe, fd):
        p.add_argument("--dest", required=True, help="folder to download into")
        p.add_argument("--limit", type=int, default=1, help="most recent N filings")
        p.add_argument("--base-url", help="API base URL (a mirror or a test server)")
    f.set_defaults(fn=cmd_fetch)


def _warehouse_parsers(add) -> None:
    rp = add("report", help="print the latest build's report path (or an evaluation's with --eval)")
    rp.add_argument("--eval", help="an evaluation id (eval-... or ext-...; see the reports folder)")
    rp.set_defaults(fn=cmd_report)
    add("export", help="write JSONL/SFT exports of the current samples").set_defaults(fn=cmd_export)
    sq = add("sql", help="run a read-only query on the current tables (no query: the duckdb shell)")
    sq.add_argument("query", nargs="?", help='e.g. "SELECT split, count(*) FROM samples GROUP BY 1"')
    sq.add_argument("--json", action="store_true", help="print the rows as JSON")
    sq.set_defaults(fn=cmd_sql)
    lc = add("llm-calls", help="LLM calls, cache hits, failures, tokens and cost per stage of a build")
    lc.add_argument("--build", help="build id (default: the latest with LLM calls)")
    lc.set_defaults(fn=cmd_llm_calls)
    st = add("status", help="current table versions and recent builds")
    st.add_argument("--last", type=int, default=5)
    st.add_argument("--json", action="store_true", help="print the records as JSON")
    st.set_defaults(fn=cmd_status)


def _service_parsers(add) -> None:
    u = add("ui", help="start the Prefect UI on 127.0.0.1")
    u.add_argument("--port", type=int, default=4200)
    u.set_defaults(fn=cmd_ui)
    add("stop-api", help="stop this home's warm Prefect API server (it also stops itself when idle)").set_defaults(
        fn=cmd_stop_api
    )
    ls = add("llm-stub", help="serve a loopback LLM (OpenAI + Gemini wire formats) to try a profile offline")
    ls.add_argument("--port", type=int, default=8099)
    ls.add_argument("--latency", type=float, default=0.0, help="seconds per answer")
    ls.add_argument("--rpm", type=float, default=None, help="enforce this requests-per-minute limit (429s)")
    ls.add_argument(
        "--fault-rate",
        type=float,
        default=0.0,
        metavar="R",
        help="share of requests that get a random fault (0-1), drawn from the seed and the request",
    )
    ls.add_argument(
        "--faults",
        default=None,
        metavar="KINDS",
        help="comma-separated fault kinds: 429,500,timeout,html,truncated,schema (default all)",
    )
    ls.add_argument("--seed", type=int, default=0, help="seed of the random faults (same seed, same faults)")
    ls.set_defaults(fn=cmd_llm_stub)


def parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--home", help="output home (default ./data or $FINHALLU_HOME)")
    common.add_argument("-v", "--verbose", action="store_true", help="Prefect logs at INFO")
    top = argparse.ArgumentParser(prog="finhallu", description=__doc__.splitlines()[0])
    sub = top.add_subparsers(dest="command", required=True)

    def add(name: str, **kw) -> argparse.ArgumentParser:
        return sub.add_parser(name, parents=[common], **kw)

    for group in (_build_parsers, _evaluation_parsers, _fetch_parser, _warehouse_parsers, _service_parsers):
        group(add)
    return top


# Commands that publish tables: on a home at a URL they create its bucket or folder where the
# filesystem allows (the others only read, and a mistyped bucket must not appear because of them).
WRITING_COMMANDS = frozenset({"build", "stage", "evaluate", "eval-external", "probe"})


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    home = args.home or os.environ.get("FINHALLU_HOME") or ""
    if "://" in home:
        from finhallu.warehouse.storage import StorageError, resolve_home

        try:  # reach the URL now: a wrong endpoint, key or bucket is one line before any work
            args.home_dir = resolve_home(home, check="create" if args.command in WRITING_COMMANDS else "read")
        except StorageError as exc:
            print(f"finhallu {args.command}: {exc}", file=sys.stderr)
            return 2
    if not getattr(args, "dry_run", False):  # a dry run runs no flow and leaves the home alone
        prepare_prefect_env(_home(args), args.verbose)
    return args.fn(args)


def entry() -> None:
    """The `finhallu` command. Before the interpreter's exit, every live object goes to the
    collector's permanent generation: its last full passes over a heap holding Great Expectations,
    Prefect and Kiwi took ~1 s of every command's exit (0.25 s so); objects are freed as before."""
    code = main()
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    entry()
