"""Command line: `frontier-bench study FILE` measures several deployments one after another, `frontier-bench run
PARAMS` one; each executes the suite notebooks through papermill, then the paper.

Exit codes: 0 = results written; 1 = a notebook failed or no request succeeded; 2 = bad input
(params or study file, notebook name), reported in one line without a traceback.
"""

from __future__ import annotations

import argparse
import getpass
import logging
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from pydantic import ValidationError

from benchlib.analysis import compare
from benchlib.analysis.plan import PLAN_REGIMES, Workload
from benchlib.config import formatting
from benchlib.config.identity import Deployment, key_lines, short_labels
from benchlib.config.params import NOTEBOOK_ORDER, BenchParams, ParamsError, TelemetryParams, load_params
from benchlib.config.paths import NOTEBOOKS_DIR, PAPER_DIR, PAPER_OUT_DIR, PROJECT_ROOT, ladder_file, outputs_root
from benchlib.interchange import import_run, llmd_export, readers
from benchlib.measure.models.quantize import QuantizeError
from benchlib.measure.servers.llama_cpp import EmbeddedServerError
from benchlib.measure.telemetry import agent
from benchlib.paper.runs import load_runs
from benchlib.published import hardware
from benchlib.records import store
from benchlib.records.rows import write_atomic
from benchlib.records.run_folder import MANIFEST_JSON, REQUESTS_CSV, SUMMARY_CSV, RunConflict
from benchlib.records.secrets import cut, redact_url
from benchlib.suites import fleet, ladder, study
from benchlib.suites.load.fleet_levels import check_client_nodes
from benchlib.suites.notebooks import execute_notebook, run_notebooks, shown_path
from benchlib.views import planner, run_summary
from benchlib.views.run_summary import embedded_models, print_summary


def _say(text: str) -> None:
    """A line on the terminal, wrapped at its width (config.formatting.WIDTH) under its head."""
    print("\n".join(formatting.fit(text)), flush=True)


def _fail(message: str, code: int = 2) -> int:
    print(f"error: {message}", file=sys.stderr)
    return code


def report_line() -> str:
    """Where the paper's report is, as the last lines of a run or study say it."""
    return (f"report: {shown_path(str(PAPER_OUT_DIR / 'report.html'))} (open it in a browser; the same as Markdown: "
            f"report.md, its summary: summary.txt)")


def cmd_run(args: argparse.Namespace) -> int:
    try:
        params = load_params(args.params)
        store.configured(params.run.store)  # before a suite starts: $FRONTIER_BENCH_STORE, checked as run.store is
    except (ParamsError, store.StoreError) as exc:
        return _fail(str(exc))
    if problem := check_client_nodes(params, None):
        return _fail(f"{args.params}: {problem}")
    notebooks = args.only.split(",") if args.only else list(params.run.notebooks)
    unknown = [n for n in notebooks if n not in NOTEBOOK_ORDER or not (NOTEBOOKS_DIR / f"{n}.ipynb").is_file()]
    if unknown:
        return _fail(f"--only: unknown notebook(s) {', '.join(unknown)} (known: {', '.join(NOTEBOOK_ORDER)})")
    started = time.monotonic()
    _say(f"Frontier Bench · {args.params} · run id {params.identity()}")
    name = Deployment.from_params(params).name  # its full name once, the short label the closing summary names it by
    _say(f"  {key_lines(short_labels([name]))[0]}")
    try:
        failed, suite_dirs = run_notebooks(params, args.params, notebooks, args.fresh, progress=not args.quiet)
    except KeyboardInterrupt:
        return 130
    reasons = dict(failed)
    failed = list(failed)
    root, url = store.results_root(params)
    model_dir = params.suite_dir("x", root).parent
    paper = not args.no_paper and cmd_paper(argparse.Namespace(quiet=args.quiet, roots=[url] if url else [],
                                                                brief=True)) == 0
    if not args.no_paper and not paper:
        failed.append("paper")
    any_ok = print_summary(suite_dirs, model_dir / run_summary.TASK_TABLE)
    print()
    _say(f"results: {shown_path(str(model_dir))}/<suite>/ ({REQUESTS_CSV}, {SUMMARY_CSV}, {MANIFEST_JSON}, …)")
    if url:
        print(f"store: {redact_url(url)} (mirrored; the paper reads every host there)")
    if paper:
        _say(report_line())
    print(f"wall time {time.monotonic() - started:.0f} s")
    if failed:
        print("failed:\n" + "\n".join(f"  {name}: {cut(reasons.get(name, 'see above'), 100)}" for name in failed),
              file=sys.stderr)
    return 0 if any_ok and not failed else 1


def cmd_ladder(args: argparse.Namespace) -> int:
    """The quantization ladder (benchlib.suites.ladder): make the rungs, run each as its own deployment, then the paper."""
    try:
        params = load_params(args.params)
        types = [t for t in args.types.split(",") if t.strip()] if args.types else ladder.DEFAULT_TYPES
        started = time.monotonic()
        print(f"Frontier Bench · quantization ladder of {params.server.model} on {params.host.name}", flush=True)
        rungs = ladder.prepare(params, types, progress=lambda line: print(line, flush=True))
    except (ParamsError, ladder.LadderError, ValueError) as exc:
        return _fail(str(exc))
    except (QuantizeError, EmbeddedServerError) as exc:
        return _fail(str(exc), code=1)
    rung_study = study.Study(
        name=f"ladder-{params.host.name}", source=args.params, settle=study.SettleSpec(), paper=False,
        deployments=[study.Deployment(params=rung, notebooks=ladder.suites_for(rung),
                                      origin=f"{args.params} (ladder rung {qtype})") for qtype, rung in rungs])
    try:
        outcome = study.run_study(rung_study, _suite_runner(args.quiet), fresh=args.fresh,
                                  progress=lambda line: print(line, flush=True))
    except KeyboardInterrupt:
        return 130
    failed = [f"{label}: {why}" for label, why in outcome.failed.items()]
    paper = not args.no_paper and cmd_paper(argparse.Namespace(quiet=args.quiet, brief=True)) == 0
    if not args.no_paper and not paper:
        failed.append("paper")
    any_ok = print_summary(outcome.suite_dirs, rung_study.folder / run_summary.TASK_TABLE)
    record = ladder_file(params.host.name)
    print()
    _say(f"ladder: {shown_path(str(record))} · rung results under {shown_path(str(record.parent))}/<model>/")
    if paper:
        _say(report_line())
    print(f"wall time {time.monotonic() - started:.0f} s")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 0 if any_ok and not failed else 1


def _suite_runner(quiet: bool) -> study.SuiteRunner:
    def run(params: BenchParams, notebooks: list[str], fresh: bool) -> tuple[dict[str, str], list[Path]]:
        return run_notebooks(params, params.source or "study", notebooks, fresh, progress=not quiet)
    return run


def cmd_study(args: argparse.Namespace) -> int:
    """Several deployments one after another (benchlib.suites.study), then one paper over all of them."""
    try:
        plan = study.load_study(args.study)
    except study.StudyError as exc:
        return _fail(str(exc))
    if args.only:
        unknown = [n for n in args.only.split(",") if n not in NOTEBOOK_ORDER]
        if unknown:
            return _fail(f"--only: unknown notebook(s) {', '.join(unknown)} (known: {', '.join(NOTEBOOK_ORDER)})")
        for dep in plan.deployments:
            dep.notebooks = [n for n in dep.notebooks if n in args.only.split(",")]
    for dep in plan.deployments:
        if problem := check_client_nodes(dep.params, args.ray):
            return _fail(f"{dep.label}: {problem}")
    started = time.monotonic()
    _say(f"Frontier Bench · study {plan.name} · {args.study}")
    print(f"{len(plan.deployments)} deployment(s), each named by its short label from here on:", flush=True)
    labels = plan.labels
    for line in key_lines({dep.label: labels[dep.key] for dep in plan.deployments}):
        print(f"  {line}", flush=True)
    url = ""
    try:
        if args.ray:  # each deployment on its host's Ray node, hosts in parallel; the paper from the shared store
            url = fleet.fleet_store(plan)
            outcome = fleet.run_fleet(plan, args.ray, _suite_runner(True), fresh=args.fresh,
                                      progress=lambda line: print(line, flush=True))
            root = store.materialize(url)
            outcome.suite_dirs = [d.params.suite_dir(s, root) for d in plan.deployments for s in d.notebooks
                                  if d.params.suite_dir(s, root).is_dir()]
        else:
            outcome = study.run_study(plan, _suite_runner(args.quiet), fresh=args.fresh,
                                      progress=lambda line: print(line, flush=True))
    except (study.StudyError, store.StoreError) as exc:
        return _fail(str(exc))
    except KeyboardInterrupt:
        print("\ninterrupted; finished requests are kept, rerun the same command to resume", file=sys.stderr)
        return 130
    short = {dep.label: labels[dep.key] for dep in plan.deployments}
    failed = [f"{short.get(label, label)}: {why}" for label, why in outcome.failed.items()]
    wants_paper = plan.paper and not args.no_paper
    paper = wants_paper and cmd_paper(argparse.Namespace(quiet=args.quiet, roots=[url] if url else [],
                                                         brief=True)) == 0
    if wants_paper and not paper:
        failed.append("paper")
    any_ok = print_summary(outcome.suite_dirs, plan.folder / run_summary.TASK_TABLE)
    print()
    _say(f"study: {len(outcome.done)} done, {len(outcome.skipped)} done earlier, {len(outcome.failed)} failed · "
         f"its record: {shown_path(str(plan.folder / study.STUDY_JSON))}")
    if paper:
        _say(report_line())
    print(f"wall time {time.monotonic() - started:.0f} s")
    if failed:
        print("failed:\n" + "\n".join(f"  {cut(line, formatting.WIDTH - 2)}" for line in failed), file=sys.stderr)
    return 0 if any_ok and not failed else 1


def cmd_plan(args: argparse.Namespace) -> int:
    """Predict every candidate on a host, ranked for a regime (benchlib.views.planner); --measure K runs the top K."""
    workload = Workload(context_tokens=args.context, concurrency=args.concurrency, prompt_tokens=args.prompt)
    try:
        if args.seeds:
            print("\n".join(planner.seed_lines()))
            return 0
        name = args.host or load_params(planner.LADDER_PARAMS).host.name
        host = hardware.named_host(args.host) if args.host else planner.this_host(name)
        entries = planner.candidates_from(args.candidates) if args.candidates else \
            planner.default_candidates(name)
        made = planner.make_plan(host, entries, workload, args.regime, load_runs())
    except (planner.PlanError, hardware.HardwareError, ParamsError, ValueError) as exc:
        return _fail(str(exc).strip("'\""))
    print("\n".join(planner.table_lines(made)))
    if not args.no_save:
        path = planner.save(made)
        print(planner.saved_line(path, made.id, shown_path(str(path))))
    if not args.measure:
        return 0
    if args.host or args.no_save:
        return _fail("--measure runs candidates on this machine and keeps them beside a saved plan: drop --host "
                     "and --no-save")
    try:
        measured = planner.measure_top(made, args.measure, _suite_runner(args.quiet),
                                         progress=lambda line: print(line, flush=True))
    except planner.PlanError as exc:
        return _fail(str(exc))
    except KeyboardInterrupt:
        return 130
    print("\npredicted (before measuring, own runs left out) vs measured, text suite on this host:")
    print("\n".join(planner.measured_lines(measured)))
    return 0 if all(m["n"] for m in measured) else 1


def cmd_compare(args: argparse.Namespace) -> int:
    """Study A against study B (benchlib.analysis.compare): the change table, written as Markdown and HTML; exit 1
    when a --fail-on metric regressed beyond the noise by more than its threshold."""
    try:
        thresholds = [compare.parse_threshold(t) for t in args.fail_on or []]
        for root in (args.a, args.b):
            if store.is_url(root):
                store.check_url(root)
        sent_a, sent_b = compare.read_sent(args.a), compare.read_sent(args.b)
        sent_b = compare.same(sent_b, compare.parse_same(args.same, sent_a, sent_b))
        table = compare.compare(compare.measured(sent_a), compare.measured(sent_b), thresholds)
        table = compare.with_requests(table, sent_a, sent_b)
    except (compare.CompareError, store.StoreError) as exc:
        return _fail(str(exc))
    shown_a, shown_b = (redact_url(r) if store.is_url(r) else r for r in (args.a, args.b))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "compare.md", compare.to_markdown(table, shown_a, shown_b))
    write_atomic(out / "compare.html", compare.to_html(table, shown_a, shown_b))
    _say(compare.headline(table))
    for r in table[compare.matched(table)].itertuples():  # the changes that go one way, one line each
        if compare.tone(r.verdict):
            _say(f"  {compare.change_line(r)}")
    _say(f"written: {shown_path(str(out / 'compare.md'))} (the whole table), {shown_path(str(out / 'compare.html'))}")
    regressed = table[table["regression"]]
    for r in regressed.itertuples():
        print(f"regression: {r.deployment} · {r.suite} · {r.metric} "
              f"{r.change:+.1f}{r.unit} [{r.change_lo:+.1f}, {r.change_hi:+.1f}]", file=sys.stderr)
    return 1 if len(regressed) else 0


def cmd_paper(args: argparse.Namespace) -> int:
    notebook = PAPER_DIR / "assemble.ipynb"
    if not notebook.is_file():
        print("paper/assemble.ipynb not present yet; skipping the paper", file=sys.stderr)
        return 0
    output = PAPER_OUT_DIR / "assemble.ipynb"
    roots = list(getattr(args, "roots", None) or []) or [str(outputs_root())]
    for root in roots:
        if store.is_url(root):
            try:
                store.check_url(root)
            except store.StoreError as exc:
                return _fail(str(exc))
    shown = ", ".join(redact_url(r) if store.is_url(r) else r for r in roots)
    _say(f"▶ paper: executing paper/assemble.ipynb from {shown} → {shown_path(str(PAPER_OUT_DIR))}/")
    try:
        execute_notebook(notebook, output, {"outputs_dir": roots[0], "more_roots": roots[1:]},
                         progress=not args.quiet)
    except Exception as exc:  # noqa: BLE001
        print(f"✗ paper failed: {str(exc).strip().splitlines()[-1] if str(exc).strip() else exc}", file=sys.stderr)
        return 1
    if getattr(args, "brief", False):  # after a run or study: its closing summary says where the report is
        return 0
    summary = PAPER_OUT_DIR / "summary.txt"
    if summary.is_file():  # its title, then the verdict in one sentence (paper.summary.Summary.text), as the report
        print()
        for paragraph in summary.read_text(encoding="utf-8").split("\n\n")[:2]:
            _say(paragraph.strip())
        print()
    _say(f"✓ paper written to {shown_path(str(PAPER_OUT_DIR))}/")
    _say(report_line())
    return 0


def explore_copy(root: Path | None = None) -> Path:
    """The explorer's working copy under outputs/ (git-ignored): open and save that one, so the committed
    notebooks/explore.ipynb stays without outputs and unmodified. An existing copy is kept (your edits)."""
    target = (root or outputs_root()) / "explore.ipynb"
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(NOTEBOOKS_DIR / "explore.ipynb", target)
    return target


LAB_PORT = 8888  # JupyterLab's own default; the first free port from here on is taken


def free_port(host: str, first: int = LAB_PORT, tries: int = 50) -> int:
    """The first port from `first` that `host` can bind: JupyterLab is then told that port and no other, so the
    address and the tunnel line printed before it starts are the ones it serves."""
    for port in range(first, first + tries):
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            try:
                probe.bind((host, port))
            except OSError:
                continue
            return port
    raise OSError(f"no free port on {host} in {first}–{first + tries - 1}")


def lab_command(target: Path, ip: str, port: int, as_root: bool) -> list[str]:
    """JupyterLab on `target`, bound to `ip`:`port` only. Root is the normal user in containers and on rented GPU
    machines; Jupyter refuses it ("Running as root is not recommended") unless told --allow-root."""
    # Jupyter opens a file only inside the folder it serves: the project, or the outputs folder where that lies elsewhere
    served = PROJECT_ROOT if target.resolve().is_relative_to(PROJECT_ROOT.resolve()) else target.parent
    return [sys.executable, "-m", "jupyterlab", str(target), f"--notebook-dir={served}", f"--ServerApp.ip={ip}",
            f"--ServerApp.port={port}", "--ServerApp.port_retries=0", "--no-browser"] + \
        (["--allow-root"] if as_root else [])


def tunnel_hint(ip: str, port: int) -> str:
    """How to reach the explorer from another machine: an SSH tunnel to the loopback address it listens on."""
    if ip in ("127.0.0.1", "localhost", "::1"):
        return (f"from another machine: ssh -N -L {port}:127.0.0.1:{port} {getpass.getuser()}@{socket.gethostname()}, "
                f"then open the same address there")
    return f"listening on {ip}: anyone who reaches that address and has the token can open it"


def cmd_explore(args: argparse.Namespace) -> int:
    target = explore_copy()
    print(f"explorer: {shown_path(str(target))} (a working copy; notebooks/explore.ipynb stays clean)", flush=True)
    if args.no_lab:
        return 0
    try:
        port = args.port or free_port(args.ip)
    except OSError as exc:
        return _fail(str(exc))
    print(f"explorer: http://{args.ip}:{port}/lab (the token is in JupyterLab's lines below); "
          f"{tunnel_hint(args.ip, port)}", flush=True)
    return subprocess.call(lab_command(target, args.ip, port, as_root=os.geteuid() == 0))


def cmd_bundle(args: argparse.Namespace) -> int:
    target = Path(args.output or f"{args.host}-results.tar.gz")
    try:
        count = store.bundle(outputs_root(), args.host, target)
    except store.StoreError as exc:
        return _fail(str(exc))
    print(f"bundle: {target} ({count} files of host {args.host}); "
          f"on the other host: frontier-bench import {target.name}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    """Exit 0 when every suite folder of the bundle is here; 1 when one was skipped (it lacks its run.json); 2 when
    nothing could be imported (not a bundle, a member refused, another run here): one line, nothing written."""
    try:
        done = store.import_bundle(Path(args.bundle), outputs_root())
    except (store.StoreError, OSError) as exc:
        lines = str(exc).strip().splitlines() or [type(exc).__name__]
        message = lines[0] if lines[0].startswith(str(args.bundle)) else f"{args.bundle}: {lines[0]}"
        return _fail(message)
    for label in done.added:
        print(f"imported {label}")
    for label in done.completed:
        print(f"completed {label} (same run id: the files this copy lacked were added)")
    for label in done.present:
        print(f"already here (same run id, counted once): {label}")
    for line in done.skipped:
        print(f"skipped {line}", file=sys.stderr)
    print(f"{len(done.added)} suite folder(s) imported, {len(done.completed)} completed, {len(done.skipped)} "
          f"skipped into {shown_path(str(outputs_root()))}/")
    return 1 if done.skipped else 0


def cmd_import_results(args: argparse.Namespace) -> int:
    """Another tool's results as a run folder of the params file's deployment (benchlib.interchange.import_run); exit 2
    with one line naming the file and the record when they cannot be read, nothing written."""
    try:
        done = import_run.import_results(args.tool, args.path, args.params, fresh=args.fresh,
                                         model_mismatch_ok=args.model_mismatch_ok)
    except (readers.ForeignError, ParamsError, RunConflict, OSError) as exc:
        return _fail(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
    run = done.run
    what = f"{run.tool} {run.version or '(version unknown)'}"
    if done.already:
        print(f"already imported (same files, run {done.run_id}): {shown_path(str(done.out_dir))}")
        return 0
    rows = f"{done.rows} request rows" if done.rows else "the tool's aggregates only (no request rows)"
    found = "" if args.tool else f" (read as {run.tool}'s files: --from to say otherwise)"
    print(f"imported {rows} measured by {what}{found} → {shown_path(str(done.out_dir))}/")
    if done.model_mismatch:
        print(f"  filed under the params' model although {run.tool} measured {run.model!r} (--model-mismatch-ok; "
              f"the manifest keeps it: measured_by.model_mismatch)")
    for line in run.cannot_give:
        print(f"  not in {run.tool}'s files: {line}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """A run folder in another tool's format (llm-d's Benchmark Report v0.2), validated before it is written."""
    try:
        target = llmd_export.export(Path(args.run_folder), Path(args.output) if args.output else None)
    except (llmd_export.ExportError, OSError) as exc:
        return _fail(str(exc).strip().splitlines()[0])
    print(f"written: {shown_path(str(target))} (llm-d Benchmark Report v0.2, validated against its schema)")
    return 0


def cmd_fleet_node(args: argparse.Namespace) -> int:
    """A fleet node's `ray start` (benchlib.suites.fleet.node_command): printed with the caller's line, or run."""
    try:
        argv = fleet.node_command(args.bind, head=args.head, join=args.join or "", host=args.host or "",
                                  client_only=args.client_only, port=args.port,
                                  ray=str(Path(sys.executable).with_name("ray")))
        if args.start:
            return fleet.start_node(argv, head=args.head)
    except fleet.FleetError as exc:
        return _fail(str(exc))
    print(fleet.shown(argv))
    head = args.join or f"{args.bind}:{args.port}"
    print(f"# then, where you type: {fleet.shown(['.venv/bin/frontier-bench', 'study', 'FILE', '--ray', head])}")
    return 0


def cmd_telemetry_agent(args: argparse.Namespace) -> int:
    try:
        settings = TelemetryParams(power_hz=args.power_hz)
        agent.serve(args.host, args.port, args.token_env, settings, args.buffer)
    except (ValueError, ValidationError) as exc:
        return _fail(str(exc).splitlines()[0])
    except OSError as exc:  # the port is taken, the address is not this host's
        return _fail(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    try:
        params = load_params(args.params)
        store.configured(params.run.store)  # the store $FRONTIER_BENCH_STORE names is checked as run.store is
    except (ParamsError, store.StoreError) as exc:
        return _fail(str(exc))
    print(f"{args.params}: ok · run id {params.identity()} · notebooks {', '.join(params.run.notebooks)}")
    return 0




def cmd_models(args: argparse.Namespace) -> int:
    """The embedded models' GGUF files, to serve with a server of your own (the README's own-server walk)."""
    models = embedded_models()
    if args.path:
        chosen = [m for m in models if args.path.lower() in m[0].lower()]
        if len(chosen) != 1:
            return _fail(f"--path {args.path}: {'no' if not chosen else 'more than one'} embedded model matches "
                         f"(names: {', '.join(m[0] for m in models)})")
        print(chosen[0][1])
        return 0
    if not models:
        return _fail("no embedded model is installed (make run installs them)", code=1)
    print("The embedded models (serve one yourself: .venv/bin/python -m llama_cpp.server --model PATH):")
    for name, gguf, source in models:
        print(f"  {name:<30} {shown_path(gguf)}  ({source})")
    return 0


def _run_options(parser: argparse.ArgumentParser) -> None:
    """What every command that runs suites takes: --fresh, --no-paper, --quiet."""
    parser.add_argument("--fresh", action="store_true", help="archive existing results of other params and start over")
    parser.add_argument("--no-paper", action="store_true", help="skip paper/assemble.ipynb at the end")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="frontier-bench", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="execute the suite notebooks for a params file, then the paper")
    run.add_argument("params", help="params/<host-model>.yaml")
    run.add_argument("--only", help="comma-separated notebooks (default: run.notebooks of the params file)")
    _run_options(run)
    run.set_defaults(func=cmd_run)
    stu = sub.add_parser("study", help="several deployments one after another (a study file), then one paper")
    stu.add_argument("study", help="params/studies/<name>.yaml")
    stu.add_argument("--only", help="comma-separated notebooks: run only these of each deployment's suites")
    stu.add_argument("--ray", metavar="ADDRESS", help="a fleet study: each deployment on the Ray node carrying its "
                     "`host:` resource, hosts in parallel, all writing to the results store (auto, host:6379, …)")
    _run_options(stu)
    stu.set_defaults(func=cmd_study)
    cmp_ = sub.add_parser("compare", help="study A against study B: each metric's change with its interval")
    cmp_.add_argument("a", help="results root of study A (a folder or a store URL)")
    cmp_.add_argument("b", help="results root of study B")
    cmp_.add_argument("--fail-on", action="append", metavar="METRIC=PCT",
                      help="exit 1 when METRIC (decode_tps, ttft_s, e2e_s, accuracy) regressed beyond the noise by "
                           "more than PCT percent (percentage points for accuracy); repeatable")
    cmp_.add_argument("--same", action="append", metavar="A_NAME=B_NAME",
                      help="the same deployment under two names (full name, short label, model folder or host/folder): "
                           "compared as one, e.g. a model behind your own server in A and in the default study in B; "
                           "repeatable")
    cmp_.add_argument("--out", default="outputs/compare", help="where compare.md and compare.html go")
    cmp_.set_defaults(func=cmd_compare)
    lad = sub.add_parser("ladder", help="quantization ladder of the embedded model: each rung run as a deployment, "
                                         "then the paper (bandwidth law)")
    lad.add_argument("params", nargs="?", default="params/embedded.yaml", help="embedded params (default: %(default)s)")
    lad.add_argument("--types", help=f"comma-separated rungs (default: {','.join(ladder.DEFAULT_TYPES)})")
    _run_options(lad)
    lad.set_defaults(func=cmd_ladder)
    pln = sub.add_parser("plan", help="what should run here: every candidate's fit, decode, prefill, TTFT and energy "
                                       "predicted with intervals, ranked for a regime; --measure K checks the top K")
    pln.add_argument("candidates", nargs="*", help="GGUF files, config.json files or catalog .yaml files (default: "
                                                   "the ladder's rungs and the default study's models)")
    pln.add_argument("--host", help="a host of paper/reference/hardware.csv instead of this machine (rtx3090, gb10, …)")
    pln.add_argument("--regime", default="workstation", choices=PLAN_REGIMES)
    pln.add_argument("--context", type=int, default=2048, help="context tokens per stream the server allocates")
    pln.add_argument("--concurrency", type=int, default=1, help="concurrent streams (fit and serving regime)")
    pln.add_argument("--prompt", type=int, default=512, help="prompt tokens of the predicted TTFT")
    pln.add_argument("--measure", type=int, default=0, metavar="K", help="run the top K here (text suite) and print "
                                                                          "predicted vs measured")
    pln.add_argument("--seeds", action="store_true", help="the seeds' check: Gemma 4 E2B BF16 on the RTX 3090 and "
                                                          "Qwen3.5-4B on GB10 predicted beside the paper's tok/s")
    pln.add_argument("--no-save", action="store_true", help="do not append the plan to outputs/<host>/plan.json")
    pln.add_argument("--quiet", action="store_true", help="no progress bars while measuring")
    pln.set_defaults(func=cmd_plan)
    paper = sub.add_parser("paper", help="regenerate paper/out/ from outputs/ (or given roots) and the reference data")
    paper.add_argument("roots", nargs="*", help="results roots: folders or store URLs (default: outputs/)")
    paper.add_argument("--quiet", action="store_true")
    paper.set_defaults(func=cmd_paper)
    explore = sub.add_parser("explore", help="open the request explorer (a working copy under outputs/) in JupyterLab")
    explore.add_argument("--no-lab", action="store_true", help="only write the working copy and print its path")
    explore.add_argument("--ip", default="127.0.0.1",
                         help="address JupyterLab listens on (default 127.0.0.1: reach it through an SSH tunnel)")
    explore.add_argument("--port", type=int, default=0, help=f"its port (default: the first free one from {LAB_PORT})")
    explore.set_defaults(func=cmd_explore)
    bund = sub.add_parser("bundle", help="write one host's results (outputs/<host>/) as a single .tar.gz")
    bund.add_argument("host", help="host folder name under outputs/")
    bund.add_argument("-o", "--output", help="archive path (default: <host>-results.tar.gz)")
    bund.set_defaults(func=cmd_bundle)
    imp = sub.add_parser("import", help="merge a bundle written by `frontier-bench bundle` into outputs/ (every "
                                        "member checked and extracted aside before anything moves into place)")
    imp.add_argument("bundle")
    imp.set_defaults(func=cmd_import)
    imr = sub.add_parser("import-results", help="another tool's results (AIPerf, GuideLLM, vllm bench serve) as a run "
                                                "of the params file's deployment, marked measured-by-<tool>")
    imr.add_argument("--from", dest="tool", choices=readers.TOOLS,
                     help="the tool that wrote PATH (default: found from the file: "
                          + "; ".join(f"{t}: {r.FILES}" for t, r in readers.READERS.items()) + ")")
    imr.add_argument("path", help="AIPerf artifact folder, GuideLLM benchmarks.json or vllm bench serve result JSON")
    imr.add_argument("--params", required=True, help="params/<deployment>.yaml: the deployment that was measured")
    imr.add_argument("--fresh", action="store_true", help="archive an earlier import of other files and replace it")
    imr.add_argument("--model-mismatch-ok", action="store_true",
                     help="file the results under the params' model although the tool's files name another one "
                          "(recorded in the manifest as measured_by.model_mismatch)")
    imr.set_defaults(func=cmd_import_results)
    exp = sub.add_parser("export", help="write a run folder in another tool's format (validated)")
    exp.add_argument("--format", required=True, choices=llmd_export.FORMATS)
    exp.add_argument("run_folder", help="outputs/<host>/<model>/<suite>/")
    exp.add_argument("-o", "--output", help=f"where to write (default: <run folder>/{llmd_export.REPORT_NAME})")
    exp.set_defaults(func=cmd_export)
    node = sub.add_parser("fleet-node", help="start (or print) a fleet node's `ray start`: bound to the address you "
                          "name, ports pinned, Ray's token authentication on (docs/fleet.md)")
    role = node.add_mutually_exclusive_group(required=True)
    role.add_argument("--head", action="store_true", help="the cluster's head node")
    role.add_argument("--join", metavar="HEAD:PORT", help="join the head at this address")
    node.add_argument("--bind", default="127.0.0.1", help="this machine's address on the fleet's private network "
                      "(default 127.0.0.1: one machine); a public or wildcard address is refused")
    node.add_argument("--host", help="the fleet host this node is (it carries the resource host:<name>)")
    node.add_argument("--client-only", action="store_true", help="a node that only sends load (sweep.nodes)")
    node.add_argument("--port", type=int, default=fleet.HEAD_PORT, help="the head's GCS port")
    node.add_argument("--start", action="store_true", help="run it (the head makes the token when there is none)")
    node.set_defaults(func=cmd_fleet_node)
    agent_cmd = sub.add_parser("telemetry-agent", help="sample this host's sensors (NVML, RAPL, powermetrics, hwmon) and "
                           "serve them to a client elsewhere (telemetry.source: agent)")
    agent_cmd.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    agent_cmd.add_argument("--port", type=int, default=agent.DEFAULT_PORT)
    agent_cmd.add_argument("--token-env", default=agent.DEFAULT_TOKEN_ENV,
                       help="environment variable holding the Bearer token clients send")
    agent_cmd.add_argument("--power-hz", type=float, default=10.0, help="power/energy/memory sampling rate")
    agent_cmd.add_argument("--buffer", type=int, default=agent.DEFAULT_BUFFER,
                       help="samples kept for clients that fall behind (ring buffer)")
    agent_cmd.set_defaults(func=cmd_telemetry_agent)
    models = sub.add_parser("models", help="the embedded models' GGUF files, to serve with a server of your own")
    models.add_argument("--path", metavar="NAME", help="print only the path of the model whose name contains NAME")
    models.set_defaults(func=cmd_models)
    validate = sub.add_parser("validate", help="check a params file and exit")
    validate.add_argument("params")
    validate.set_defaults(func=cmd_validate)
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.getLogger("papermill").setLevel(logging.WARNING)
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
