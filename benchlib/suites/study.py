"""A study: several deployments measured one after another on one host, then one paper over all of them.

A study file (params/study-*.yaml) names deployments — each a params file (relative to the study file's folder
or the project root) or an inline params block, with overrides — settings shared by all of them, and grids of
settings (every combination of the listed values; keys named together under `linked` vary together, as
`vllm bench sweep serve` pairs max_num_seqs with max_concurrency). Each grid point is its own deployment,
labelled by its settings (`server.variant`, e.g. "n_threads=1"), with its own output folder; so is every deployment
whose settings the study's overrides change ("graded_items=3": benchlib.config.variant's SETTINGS RULE) unless the
study names them itself (its overrides set server.variant), so a study never writes into another's or a plain run's folder.

The seeds measured the same way: one model served at a time ("unload all models, load the target, run a
warm-up, then 3 runs"; "finish E2B completely before starting E4B"). So the study runs deployments strictly in
turn and, between two, waits until the previous one has let go of the machine:

    SETTLE RULE: every process of the previous deployment's server process group is gone, and the host's
    available memory (MemAvailable) is back within `settle.memory_tolerance_mb` of what it was before that
    deployment started — or `settle.timeout_s` passed, which is recorded in the study's log (never silent).

Resume: each suite resumes at request level (the runner's run id); the study keeps study.json in its folder
(outputs/studies/<name>/), one entry per deployment with its run id, status and reason, so a rerun skips a
deployment whose suites all finished under the same run id and redoes the rest. A deployment that cannot
start is recorded with its reason (and its server log's tail) and the study goes on; so is one whose suites ran
but where no request succeeded (a server at a dead port), the rule by which `frontier-bench run` exits 1.

A study runs at most MAX_DEPLOYMENTS deployments, grid points included; a larger one is refused before its grids
are expanded.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pandas as pd
import psutil
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from benchlib.config import identity
from benchlib.config.identity import short_labels
from benchlib.config.params import NOTEBOOK_ORDER, BenchParams, ParamsError, validate
from benchlib.config.paths import PROJECT_ROOT, outputs_root, slug
from benchlib.config.variant import changed_settings, leaves, settings_label
from benchlib.measure.servers.llama_cpp import group_members
from benchlib.records import store
from benchlib.records.rows import write_atomic
from benchlib.records.run_folder import RunFolder
from benchlib.records.secrets import cut

STUDY_JSON = "study.json"
LOG_TAIL_LINES = 20
MAX_DEPLOYMENTS = 1000  # a study's deployments, grid points included: each runs minutes at least, so more is weeks


class StudyError(ValueError):
    """The study file cannot be used as written (one line)."""


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DeploymentSpec(_Spec):
    params: str | dict[str, Any] = Field(description="A params file, or a params block written inline")
    overrides: dict[str, Any] = Field(default_factory=dict, description="Merged over the params (nested keys)")
    notebooks: list[str] | None = Field(None, description="Suites for this deployment; default: the study's")
    host: str | None = Field(None, min_length=1, max_length=80, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
                             description="The fleet host it runs on with --ray (the node carrying resource "
                                         "host:<name>, benchlib.suites.fleet); also its host.name unless set")


class GridSpec(DeploymentSpec):
    axes: dict[str, list[Any]] = Field(description="Dotted params key -> values (every combination is a point)")
    linked: list[list[str]] = Field(default_factory=list, description="Keys that vary together, value by value")

    @model_validator(mode="after")
    def _linked(self) -> "GridSpec":
        if not self.axes or any(not values for values in self.axes.values()):
            raise ValueError("every grid axis needs at least one value")
        for group in self.linked:
            missing = [k for k in group if k not in self.axes]
            if missing:
                raise ValueError(f"linked keys {missing} are not grid axes")
            if len({len(self.axes[k]) for k in group}) != 1:
                raise ValueError(f"linked keys {group} need the same number of values")
        return self


class SettleSpec(_Spec):
    timeout_s: float = Field(30.0, ge=0, le=3600, description="Longest wait for the previous server to let go")
    memory_tolerance_mb: float = Field(256.0, ge=0, description="MemAvailable back within this of its baseline")


class StudyFile(_Spec):
    name: str = Field(min_length=1, max_length=80, description="The study's name: outputs/studies/<name>/")
    description: str = ""
    notebooks: list[str] = Field(default_factory=lambda: list(NOTEBOOK_ORDER),
                                 description="Suites each deployment runs unless it names its own")
    overrides: dict[str, Any] = Field(default_factory=dict, description="Merged over every deployment's params")
    deployments: list[DeploymentSpec] = Field(default_factory=list)
    grids: list[GridSpec] = Field(default_factory=list)
    settle: SettleSpec = Field(default_factory=SettleSpec)
    paper: bool = Field(True, description="One paper over every deployment at the end")

    @model_validator(mode="after")
    def _some(self) -> "StudyFile":
        if not self.deployments and not self.grids:
            raise ValueError("a study needs at least one deployment or grid")
        return self


@dataclass
class Deployment:
    """One deployment of a study: its validated params and the suites it runs."""

    params: BenchParams
    notebooks: list[str]
    origin: str  # the params file or grid it came from
    host: str = ""  # the fleet host it must run on (study --ray), '' where the study names none

    @property
    def label(self) -> str:
        return identity.Deployment.from_params(self.params).name

    @property
    def key(self) -> str:
        return "/".join(self.params.deployment_parts())


@dataclass
class Study:
    name: str
    source: str
    deployments: list[Deployment]
    settle: SettleSpec
    paper: bool = True

    @property
    def folder(self) -> Path:
        return outputs_root() / "studies" / slug(self.name)

    @property
    def labels(self) -> dict[str, str]:
        """Each deployment's short label by its key (config.identity's SHORT LABEL RULE): what the terminal names
        it by once the study's plan has said each full name."""
        names = short_labels([dep.label for dep in self.deployments])
        return {dep.key: names[dep.label] for dep in self.deployments}


# ---- reading a study file -------------------------------------------------------------------------------------
def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Nested dicts merged key by key (`over` wins); lists and scalars replaced whole. Dotted keys in `over`
    ("server.embedded.n_threads") address nested ones."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(key, str) and "." in key:
            head, rest = key.split(".", 1)
            below = out.get(head)
            out[head] = merge(below if isinstance(below, dict) else {}, {rest: value})
            continue
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _read_yaml(path: Path, what: str) -> Any:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise StudyError(f"{path}: cannot read {what}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise StudyError(f"{path}: not valid YAML{where}") from None


def _base_params(spec: DeploymentSpec, folder: Path, source: str) -> tuple[dict[str, Any], str]:
    if isinstance(spec.params, dict):
        return spec.params, f"{source} (inline params)"
    for candidate in (folder / spec.params, PROJECT_ROOT / spec.params, Path(spec.params)):
        if candidate.is_file():
            data = _read_yaml(candidate, "params")
            if not isinstance(data, dict):
                raise StudyError(f"{candidate}: expected a mapping of params sections")
            return data, spec.params
    raise StudyError(f"{source}: params file {spec.params!r} not found (relative to {folder} or the project)")


def grid_points(grid: GridSpec) -> list[dict[str, Any]]:
    """Every combination of the grid's axes, linked keys stepping together: a list of {dotted key: value}."""
    groups: list[list[str]] = [list(g) for g in grid.linked]
    grouped = {k for g in groups for k in g}
    groups += [[k] for k in grid.axes if k not in grouped]
    steps = [[dict(zip(g, values)) for values in zip(*(grid.axes[k] for k in g))] for g in groups]
    points = []
    for combo in itertools.product(*steps):
        point: dict[str, Any] = {}
        for part in combo:
            point.update(part)
        points.append({k: point[k] for k in grid.axes})  # in the order the file lists them
    return points


def grid_size(grid: GridSpec) -> int:
    """How many points grid_points makes, without making them: linked keys count once."""
    grouped = {k for g in grid.linked for k in g}
    return math.prod([len(grid.axes[g[0]]) for g in grid.linked if g]
                     + [len(values) for key, values in grid.axes.items() if key not in grouped])


def point_label(point: dict[str, Any]) -> str:
    """'n_threads=1,parallel=2': each key's last part and its value."""
    return ",".join(f"{key.rsplit('.', 1)[-1]}={value}" for key, value in point.items())


def named_settings(base: dict[str, Any], data: dict[str, Any], skip: list[str] | None = None) -> dict[str, Any]:
    """`data` (the params file `base` with the study's overrides) with the settings it changes appended to its
    server.variant (benchlib.config.variant's SETTINGS RULE; a grid's axes, `skip`, are labelled by its points),
    so they name its folder; unchanged where the study names its settings itself (it sets server.variant)."""
    variant = str((base.get("server") or {}).get("variant") or "")
    if str((data.get("server") or {}).get("variant") or "") != variant:
        return data
    try:
        theirs, mine = validate(base).shaping_params(), validate(data).shaping_params()
    except ParamsError:  # inline params the overrides complete (or params _deployment will refuse): as written
        theirs, mine = base, data
    changed = {key: value for key, value in changed_settings(theirs, mine).items()
               if not any(key[:len(axis.split("."))] == tuple(axis.split(".")) for axis in skip or [])}
    label = settings_label(changed, list(leaves(mine)))
    if not label:
        return data
    return merge(data, {"server": {"variant": f"{variant},{label}" if variant else label}})


def _deployment(data: dict[str, Any], notebooks: list[str], origin: str, host: str | None = None) -> Deployment:
    data.pop("source", None)
    if host and not (data.get("host") or {}).get("name"):
        data = merge(data, {"host.name": host})
    try:
        params = validate(data, source=origin)
    except ParamsError as exc:
        raise StudyError(str(exc)) from None
    unknown = [n for n in notebooks if n not in NOTEBOOK_ORDER]
    if unknown:
        raise StudyError(f"{origin}: unknown notebook(s) {', '.join(unknown)} (known: {', '.join(NOTEBOOK_ORDER)})")
    params = params.model_copy(update={"source": origin})
    return Deployment(params=params, notebooks=list(notebooks), origin=origin, host=host or "")


def load_study(path: str | Path) -> Study:
    """Read, expand and validate a study file; every problem is one StudyError line."""
    file = Path(path)
    if not file.is_file():
        raise StudyError(f"{path}: study file not found")
    raw = _read_yaml(file, "the study")
    if not isinstance(raw, dict):
        raise StudyError(f"{path}: expected a mapping (name, deployments, grids, …)")
    try:
        spec = StudyFile.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        raise StudyError(f"{path}: {where}: {err['msg']}") from None
    sizes = [grid_size(grid) for grid in spec.grids]
    if len(spec.deployments) + sum(sizes) > MAX_DEPLOYMENTS:  # before expanding: 2M points took 3.2 GB
        grids = ", ".join(f"grids[{i}] {' × '.join(str(len(v)) for v in g.axes.values())} = {n:,} points"
                          for i, (g, n) in enumerate(zip(spec.grids, sizes)))
        raise StudyError(f"{path}: {len(spec.deployments) + sum(sizes):,} deployments ({grids}); a study runs at "
                         f"most {MAX_DEPLOYMENTS:,}: thin the axes or split the study")
    deployments: list[Deployment] = []
    for i, entry in enumerate(spec.deployments):
        base, origin = _base_params(entry, file.parent, f"{path}: deployments[{i}]")
        data = named_settings(base, merge(merge(base, spec.overrides), entry.overrides))
        deployments.append(_deployment(data, entry.notebooks or spec.notebooks, origin, entry.host))
    for i, grid in enumerate(spec.grids):
        base, origin = _base_params(grid, file.parent, f"{path}: grids[{i}]")
        shared = named_settings(base, merge(merge(base, spec.overrides), grid.overrides), skip=list(grid.axes))
        for point in grid_points(grid):
            data = merge(shared, point)
            label = point_label(point)
            variant = data.setdefault("server", {}).get("variant")
            data["server"]["variant"] = f"{variant},{label}" if variant else label
            deployments.append(_deployment(data, grid.notebooks or spec.notebooks, f"{origin} [{label}]", grid.host))
    seen: dict[str, str] = {}
    for dep in deployments:
        if dep.key in seen:
            raise StudyError(f"{path}: two deployments write to the same folder ({dep.key}): {seen[dep.key]} and "
                             f"{dep.origin}; give one a server.variant")
        seen[dep.key] = dep.origin
    _check_baselines(path, deployments)
    return Study(name=spec.name, source=str(path), deployments=deployments, settle=spec.settle, paper=spec.paper)


def _check_baselines(path: str | Path, deployments: list[Deployment]) -> None:
    """A compare plan (run.quality) names a deployment of the study that runs before it: its answers are what the
    plan compares with, look by look (benchlib.suites.quality_looks)."""
    earlier: list[str] = []
    for dep in deployments:
        plan = dep.params.run.quality
        if plan.plan == "compare" and plan.baseline not in earlier:
            raise StudyError(f"{path}: {dep.label}: run.quality.baseline {plan.baseline!r} is not a deployment that "
                             f"runs before it (those: {', '.join(earlier[::2]) or 'none'})")
        earlier += [dep.params.deployment_parts()[1], dep.label]


# ---- running it -----------------------------------------------------------------------------------------------
@dataclass
class StudyState:
    """study.json: one entry per deployment (key -> run id, status, reason, log tail, times)."""

    path: Path
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def read(cls, path: Path) -> "StudyState":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            entries = data.get("deployments", {}) if isinstance(data, dict) else {}
        except (OSError, ValueError):
            entries = {}
        return cls(path=path, entries=entries if isinstance(entries, dict) else {})

    def done(self, dep: Deployment) -> bool:
        entry = self.entries.get(dep.key, {})
        return entry.get("status") == "done" and entry.get("run_id") == dep.params.identity()

    def record(self, dep: Deployment, **fields: Any) -> None:
        entry = self.entries.setdefault(dep.key, {})
        entry.update(label=dep.label, origin=dep.origin, run_id=dep.params.identity(), **fields)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(self.path, json.dumps({"deployments": self.entries}, indent=2, default=str))


def mem_available_mb() -> float:
    return psutil.virtual_memory().available / 1e6


def server_groups(suite_dirs: list[Path]) -> list[int]:
    """Process groups of the servers the deployment's suites started (their manifests name them)."""
    groups = []
    for folder in suite_dirs:
        pid = (RunFolder(folder).manifest.get("embedded_server") or {}).get("pid")
        if isinstance(pid, int):
            groups.append(pid)
    return groups


def settle(groups: list[int], baseline_mb: float, spec: SettleSpec,
           members: Callable[[int], list[int]] = group_members,
           available: Callable[[], float] = mem_available_mb, sleep: Callable[[float], None] = time.sleep,
           clock: Callable[[], float] = time.monotonic) -> dict[str, Any]:
    """Wait (SETTLE RULE) until the servers' process groups are gone and memory is back; what was seen."""
    started = clock()
    while True:
        alive = [g for g in groups if members(g)]
        free = available()
        back = free >= baseline_mb - spec.memory_tolerance_mb
        waited = clock() - started
        if (not alive and back) or waited >= spec.timeout_s:
            return {"settled": not alive and back, "waited_s": round(waited, 2), "alive_groups": alive,
                    "mem_available_mb": round(free, 1), "baseline_mb": round(baseline_mb, 1)}
        sleep(0.2)


def log_tail(suite_dirs: list[Path], lines: int = LOG_TAIL_LINES) -> str:
    """The last lines of the server log a failed deployment left (manifest's embedded_server.log), if any."""
    for folder in suite_dirs:
        log = Path((RunFolder(folder).manifest.get("embedded_server") or {}).get("log", ""))
        try:
            if log.is_file():
                return "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
        except OSError:
            continue
    return ""


def no_request_ok(suite_dirs: list[Path]) -> str:
    """Why none of the deployment's requests succeeded ("" when one did, or when no suite ran): from each suite's
    summary.csv (n_ok, n_failed, failures), as `frontier-bench run` decides its exit status."""
    if not suite_dirs:
        return ""
    parts = []
    for folder in suite_dirs:
        summary = RunFolder(folder).summary()
        counts = {name: int(pd.to_numeric(summary.get(name, pd.Series(dtype=float)), errors="coerce").fillna(0)
                            .sum()) for name in ("n_ok", "n_failed", "n_unsupported")}
        if counts["n_ok"]:
            return ""
        failures = [str(f) for f in summary.get("failures", pd.Series(dtype=object)).dropna() if str(f).strip()]
        parts.append(f"{folder.name} {counts['n_failed']} failed, {counts['n_unsupported']} unsupported"
                     + (f" ({cut(failures[0], 120)})" if failures else ""))
    return "no request succeeded: " + "; ".join(parts)


# The function that runs one deployment's suites: (params, notebooks, fresh) -> (failed suites with reasons,
# suite folders). The command line passes the papermill runner; tests pass their own.
SuiteRunner = Callable[[BenchParams, list[str], bool], tuple[dict[str, str], list[Path]]]


@dataclass
class StudyResult:
    done: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    suite_dirs: list[Path] = field(default_factory=list)  # of every deployment, the skipped ones' included


def run_study(study: Study, run_suites: SuiteRunner, fresh: bool = False,
              progress: Callable[[str], None] = print) -> StudyResult:
    """Each deployment in turn: wait for the machine to settle, run its suites, record the outcome."""
    state = StudyState.read(study.folder / STUDY_JSON)
    result = StudyResult()
    previous: list[int] = []
    baseline = mem_available_mb()
    total, labels = len(study.deployments), study.labels
    for i, dep in enumerate(study.deployments, 1):
        head = f"■ deployment {i}/{total}: {labels[dep.key]}"
        if not fresh and state.done(dep):
            progress(f"{head} — done earlier (run {dep.params.identity()}), skipped")
            result.skipped.append(dep.label)
            root = store.results_root(dep.params)[0]
            result.suite_dirs += [dep.params.suite_dir(s, root) for s in dep.notebooks
                                  if dep.params.suite_dir(s, root).is_dir()]
            continue
        if previous:
            seen = settle(previous, baseline, study.settle)
            if not seen["settled"]:
                progress(f"  the previous server had not let go after {seen['waited_s']} s "
                         f"(groups alive {seen['alive_groups']}, MemAvailable {seen['mem_available_mb']} MB "
                         f"vs {seen['baseline_mb']} MB before it); going on, recorded in {STUDY_JSON}")
            state.record(dep, settle=seen)
        baseline = mem_available_mb()
        progress(f"{head} · suites {', '.join(dep.notebooks)} · run id {dep.params.identity()}")
        started = time.time()
        state.record(dep, status="running", started_unix=started)
        failed, dirs = run_suites(dep.params, dep.notebooks, fresh)
        result.suite_dirs += dirs
        previous = server_groups(dirs)
        none_ok = "" if failed else no_request_ok(dirs)
        if none_ok:  # as `run` exits 1 when no request succeeded: failed, and retried on resume
            failed = {"all suites": none_ok}
        if failed:
            reason = "; ".join(f"{suite}: {why}" for suite, why in failed.items())
            state.record(dep, status="failed", reason=reason, log_tail=log_tail(dirs),
                         seconds=round(time.time() - started, 1))
            result.failed[dep.label] = reason
            line = f"  ✗ {labels[dep.key]}: {reason}"
            progress(line if len(line) <= 100 else cut(line, 90) + f" (whole in {STUDY_JSON})")
        else:
            state.record(dep, status="done", reason="", seconds=round(time.time() - started, 1))
            result.done.append(dep.label)
    return result
