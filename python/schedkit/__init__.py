"""schedkit from Python: the simulator, comparisons and sweeps, with pandas results.

>>> import schedkit
>>> sc = schedkit.Scenario.load("examples/textbook/rr.toml").with_policy("srtf")
>>> r = schedkit.simulate(sc)
>>> r.summary["avg_waiting_ns"][0]
6500000

Every number comes from the same Rust code as the ``schedkit`` command line (the scenario
parser, the simulator, the report, the Gantt renderer), so Python and the CLI agree exactly.
Times are integer nanoseconds (``*_ns`` columns). See docs/python.md.
"""

from __future__ import annotations

import json
import math
import os
from typing import TYPE_CHECKING, Any, Iterable, Optional, Sequence, Union

import numpy as np
import pandas as pd

from . import _schedkit
from ._schedkit import OptionError, Scenario, ScenarioError

if TYPE_CHECKING:  # pragma: no cover
    import dask.distributed

__all__ = [
    "Scenario",
    "ScenarioError",
    "OptionError",
    "Result",
    "simulate",
    "compare",
    "sweep",
    "sweep_shard",
    "merge_shards",
    "__version__",
]
__version__: str = _schedkit.__version__


_NUMPY_TYPES = {"int": np.int64, "float": np.float64, "bool": np.bool_}


def _column(kind: str, values: Any, mask: Optional[bytearray]) -> pd.Series:
    """One column from the Rust module: numbers and booleans arrive as a buffer of native
    values (``bytearray``) that numpy reads in place, nulls as a byte mask; strings as a
    list."""
    if kind == "str":
        return pd.Series(values, dtype="object")
    arr = np.frombuffer(values, dtype=_NUMPY_TYPES[kind])
    if mask is None or kind == "float":
        # Floats carry NaN where null already: pandas' float64 as before.
        return pd.Series(arr, copy=False)
    nulls = np.frombuffer(mask, dtype=np.bool_)
    # Nanoseconds stay integers; a column with gaps is pandas' nullable Int64 (boolean).
    if kind == "int":
        return pd.Series(pd.arrays.IntegerArray(arr, nulls), copy=False)
    return pd.Series(pd.arrays.BooleanArray(arr, nulls), copy=False)


def _frame(table: tuple) -> pd.DataFrame:
    """A ``(name, [(column, kind, values, mask)])`` table as a typed DataFrame."""
    _, columns = table
    return pd.DataFrame({name: _column(kind, values, mask) for name, kind, values, mask in columns})


class Result:
    """One simulated run: DataFrames of the report, the trace on demand, the Gantt chart."""

    def __init__(self, native: "_schedkit.SimResult") -> None:
        self._native = native
        tables = {t[0]: _frame(t) for t in native.tables()}
        #: One row: policy, scenario, engine, cores, window_ns and every summary metric.
        self.summary: pd.DataFrame = tables["summary"]
        #: One row per thread (``name.i``) or real-time task.
        self.threads: pd.DataFrame = tables["threads"]
        #: One row per process or task: shares, GPS share, lag, waiting, turnaround.
        self.processes: pd.DataFrame = tables["processes"]
        #: One row per group (empty without ``[[group]]``).
        self.groups: pd.DataFrame = tables["groups"]

    @property
    def policy(self) -> str:
        return self._native.policy

    def intervals(self) -> pd.DataFrame:
        """The trace: one row per run interval (core, process, thread, job, start_ns,
        end_ns, reason), ordered by start then core."""
        return _frame(self._native.intervals_table())

    def gantt(self, path: Union[str, os.PathLike]) -> None:
        """Writes the Gantt chart, the same SVG as ``schedkit sim --gantt``."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(self._native.gantt_svg())

    def to_json(self) -> dict:
        """The report as ``schedkit sim --json`` prints it."""
        return json.loads(self._native.report_json())

    def __repr__(self) -> str:
        return f"<schedkit.Result policy={self.policy!r} threads={len(self.threads)}>"


def simulate(scenario: Scenario, trace: bool = False) -> Result:
    """Simulates ``scenario`` (the GIL is released meanwhile).

    ``trace=True`` keeps the trace from the start; otherwise ``intervals()`` and ``gantt()``
    run the (deterministic) simulation again with the trace kept, once.
    """
    return Result(_schedkit.simulate(scenario, trace))


#: Rows of ``compare``'s table, per process then for the whole run (as ``schedkit compare``).
_PROCESS_METRICS = ("share", "ideal_share", "avg_waiting_ns", "avg_turnaround_ns")
_SUMMARY_METRICS = (
    "avg_waiting_ns",
    "avg_turnaround_ns",
    "avg_response_ns",
    "makespan_ns",
    "max_abs_share_error",
    "mean_abs_pct_error",
    "context_switches",
    "migrations",
    "deadline_misses",
)


def compare(scenario: Scenario, policies: Sequence[str]) -> pd.DataFrame:
    """Runs ``scenario`` under each policy (in parallel, every other ``[policy]`` parameter
    kept) and returns one DataFrame with a column per policy.

    The index is ``(process, metric)``: per process its share, GPS share, average waiting
    and turnaround, then ``("summary", metric)`` rows, like ``schedkit compare``'s table. The
    full reports are in ``df.attrs["reports"]`` (policy -> the ``--json`` report dict).
    """
    if isinstance(policies, str):
        policies = [p for p in policies.split(",") if p]
    results = [Result(r) for r in _schedkit.compare(scenario, list(policies))]
    columns = {}
    index = []
    for res in results:
        values = []
        index = []
        for _, proc in res.processes.iterrows():
            for m in _PROCESS_METRICS:
                index.append((proc["name"], m))
                values.append(proc[m])
        for m in _SUMMARY_METRICS:
            index.append(("summary", m))
            values.append(res.summary[m][0])
        # float64 holds integer nanoseconds exactly up to 2**53 ns (104 days).
        columns[res.policy] = pd.Series(values, dtype="float64")
    df = pd.DataFrame(columns)
    df.index = pd.MultiIndex.from_tuples(index, names=["process", "metric"])
    # attrs hold plain data: pandas copies them along with the frame.
    df.attrs["reports"] = {r.policy: r.to_json() for r in results}
    return df


def _utilisations(u: Union[None, str, float, Iterable[float]]) -> Optional[str]:
    if u is None or isinstance(u, str):
        return u
    if isinstance(u, (int, float)):
        u = [u]
    # repr() writes the shortest text that reads back as the same double.
    return ",".join(repr(float(x)) for x in u)


def _ranges(seeds: Iterable[int]) -> list:
    """Seeds as sorted inclusive ``(first, last)`` ranges of consecutive integers."""
    if isinstance(seeds, range) and seeds.step == 1:
        return [(seeds.start, seeds.stop - 1)] if len(seeds) else []
    s = sorted(set(int(x) for x in seeds))
    if s and s[0] < 0:
        raise OptionError(f"--sweep: seeds are non-negative integers, got {s[0]}")
    out = []
    for x in s:
        if out and out[-1][1] + 1 == x:
            out[-1] = (out[-1][0], x)
        else:
            out.append((x, x))
    return out


def _rows_frame(rows: list) -> pd.DataFrame:
    cols = [
        "utilisation",
        "policy",
        "sets",
        "sets_with_misses",
        "rejected",
        "jobs",
        "deadline_misses",
        "migrations",
        "context_switches",
    ]
    df = pd.DataFrame(rows, columns=cols)
    for c in cols[2:]:
        df[c] = df[c].astype("int64")
    df["utilisation"] = df["utilisation"].astype("float64")
    # Rejected sets count as unschedulable, as in the CLI's `% sets missing`.
    df["unschedulable"] = (df["sets_with_misses"] + df["rejected"]) / df["sets"].clip(lower=1)
    return df


def _run_batch(scenario, ranges, utilisations, policies, generator):
    """One batch of a sweep, on whichever machine runs it (a Dask worker)."""
    return json.loads(
        _schedkit.sweep_ranges(scenario, ranges, utilisations, policies, generator)
    )


def _add(total: list, more: list) -> list:
    if len(total) != len(more):
        raise OptionError("sweep batches returned different points")
    keys = ("sets", "sets_with_misses", "rejected", "jobs", "deadline_misses", "migrations", "context_switches")
    out = []
    for a, b in zip(total, more):
        if (a["utilisation"], a["policy"]) != (b["utilisation"], b["policy"]):
            raise OptionError("sweep batches returned different points")
        row = dict(a)
        for k in keys:
            row[k] = a[k] + b[k]
        out.append(row)
    return out


def sweep(
    scenario: Scenario,
    seeds: Iterable[int],
    utilisations: Union[None, str, float, Iterable[float]] = None,
    policies: Optional[Sequence[str]] = None,
    generator: str = "seed001",
    client: Optional["dask.distributed.Client"] = None,
    batch_size: Optional[int] = None,
) -> pd.DataFrame:
    """A schedulability sweep, as ``schedkit sim FILE --sweep ...``: for every seed and
    utilisation a task set is drawn (``generator``: ``seed001`` or ``uunifast:N``) and run
    under every policy. ``scenario`` gives the cores, horizon and default policy.

    Returns one row per (utilisation, policy): sets, sets_with_misses, rejected, jobs,
    deadline_misses, migrations, context_switches (sums over sets) and unschedulable.

    Without ``client`` the sweep runs here on every core (the GIL released). With a Dask
    ``client``, the seeds are cut into batches of ``batch_size`` (default: four batches per
    worker) that run on the cluster's workers; the counts are sums, so the result equals the
    local one exactly.
    """
    ranges = _ranges(seeds)
    if not ranges:
        raise OptionError("--sweep: no seeds given")
    u = _utilisations(utilisations)
    pol = list(policies or [])
    if client is None:
        return _rows_frame(_run_batch(scenario, ranges, u, pol, generator))
    seeds_list = [s for a, b in ranges for s in range(a, b + 1)]
    if batch_size is None:
        workers = max(1, len(client.scheduler_info().get("workers", {})))
        batch_size = max(1, math.ceil(len(seeds_list) / (4 * workers)))
    batches = [
        _ranges(seeds_list[i : i + batch_size]) for i in range(0, len(seeds_list), batch_size)
    ]
    # Check the arguments here, on one seed, so bad input raises its located exception
    # before any work is sent to the cluster.
    _run_batch(scenario, [(ranges[0][0], ranges[0][0])], u, pol, generator)
    sc = client.scatter(scenario, broadcast=True)
    futures = client.map(
        _run_batch, [sc] * len(batches), batches, [u] * len(batches), [pol] * len(batches),
        [generator] * len(batches), pure=False,
    )
    total = None
    for rows in client.gather(futures):
        total = rows if total is None else _add(total, rows)
    return _rows_frame(total)


def sweep_shard(
    scenario: Scenario,
    seeds: str,
    utilisations: Union[None, str, float, Iterable[float]] = None,
    policies: Optional[Sequence[str]] = None,
    generator: str = "seed001",
    shard: Optional[str] = None,
) -> dict:
    """``schedkit sim FILE --sweep SEEDS [--shard I/N] --json``: the sweep document."""
    return json.loads(
        _schedkit.sweep_shard(
            scenario, seeds, _utilisations(utilisations), list(policies or []), generator, shard
        )
    )


def merge_shards(docs: Sequence[Union[dict, str, os.PathLike]]) -> dict:
    """``schedkit sweep merge``: shard documents (dicts or JSON files) into the whole sweep's."""
    pairs = []
    for i, d in enumerate(docs):
        if isinstance(d, dict):
            pairs.append((f"<shard {i + 1}>", json.dumps(d)))
        else:
            with open(d, encoding="utf-8") as f:
                pairs.append((os.fspath(d), f.read()))
    return json.loads(_schedkit.merge_shards(pairs))
