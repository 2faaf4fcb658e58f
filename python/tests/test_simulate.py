"""simulate(): the textbook numbers, DataFrame columns and dtypes, the trace, the Gantt chart."""

import pickle

import pandas as pd
import pytest

import schedkit

TEXTBOOK = {"fcfs": 10_250_000, "sjf": 7_500_000, "srtf": 6_500_000, "rr": 13_250_000}


@pytest.mark.parametrize("policy,avg_wait", TEXTBOOK.items())
def test_textbook_waiting_times(root, policy, avg_wait):
    sc = schedkit.Scenario.load(root / f"examples/textbook/{policy}.toml")
    r = schedkit.simulate(sc)
    assert r.summary["avg_waiting_ns"][0] == avg_wait
    assert r.summary["policy"][0] == policy
    # The threads' waiting times average to the summary's.
    assert r.threads["waiting_ns"].mean() == avg_wait


def test_with_policy_keeps_the_file_and_changes_the_policy(root):
    sc = schedkit.Scenario.load(root / "examples/textbook/srtf.toml")
    assert schedkit.simulate(sc.with_policy("fcfs")).summary["avg_waiting_ns"][0] != 6_500_000
    assert sc.policy == "srtf"  # scenarios are values: overrides return new ones
    assert sc.with_policy("fcfs").with_policy("srtf") == sc


def test_columns_and_dtypes(root):
    r = schedkit.simulate(schedkit.Scenario.load(root / "examples/textbook/rr.toml"))
    assert list(r.threads.columns[:4]) == ["name", "process", "arrival_ns", "start_ns"]
    for name in ["arrival_ns", "cpu_ns", "waiting_ns", "turnaround_ns", "migrations"]:
        assert r.threads[name].dtype == "int64", name
    # Task-only columns are nullable integers, empty for processes.
    assert r.threads["jobs"].dtype == "Int64"
    assert r.threads["jobs"].isna().all()
    assert r.processes["share"].dtype == "float64"
    assert r.processes["lag_ns"].dtype == "int64"
    assert len(r.summary) == 1
    assert r.summary["window_ns"][0] == 26_000_000
    # No groups in the file: an empty table that still has the processes' columns.
    assert len(r.groups) == 0
    assert list(r.groups.columns) == list(r.processes.columns)


def test_report_equals_the_cli_json(root, cli):
    for f in ["examples/textbook/rr.toml", "examples/quickstart.toml", "examples/realtime/dhall.toml"]:
        r = schedkit.simulate(schedkit.Scenario.load(f))
        assert r.to_json() == cli("sim", f, "--json"), f


def test_intervals_cover_the_cpu_time(root):
    r = schedkit.simulate(schedkit.Scenario.load(root / "examples/quickstart.toml"))
    iv = r.intervals()
    assert list(iv.columns) == ["core", "process", "thread", "job", "start_ns", "end_ns", "reason"]
    # Only processes here: every interval has a thread, none a job.
    assert iv["start_ns"].dtype == "int64" and iv["thread"].dtype == "int64"
    assert iv["job"].isna().all()
    assert (iv["end_ns"] > iv["start_ns"]).all()
    assert set(iv["reason"]) <= {"finished", "preempted", "expired", "blocked", "horizon"}
    per_process = (iv["end_ns"] - iv["start_ns"]).groupby(iv["process"]).sum()
    cpu = r.threads.groupby("process")["cpu_ns"].sum()
    assert per_process.to_dict() == cpu.to_dict()
    # On one core intervals never overlap.
    for _, lane in iv.groupby("core"):
        assert (lane["start_ns"].iloc[1:].values >= lane["end_ns"].iloc[:-1].values).all()


def test_gantt_is_the_cli_svg(root, cli, tmp_path):
    sc = schedkit.Scenario.load("examples/quickstart.toml")
    schedkit.simulate(sc).gantt(tmp_path / "py.svg")
    cli("sim", "examples/quickstart.toml", "--gantt", tmp_path / "cli.svg", as_json=False)
    assert (tmp_path / "py.svg").read_bytes() == (tmp_path / "cli.svg").read_bytes()


def test_scenarios_pickle_with_their_overrides(root):
    sc = schedkit.Scenario.load(root / "examples/textbook/rr.toml").with_policy("srtf").with_quantum("2ms")
    back = pickle.loads(pickle.dumps(sc))
    assert back == sc and back.overrides == [("policy", "srtf"), ("quantum", "2000000ns")]


def test_from_dict_and_toml_build_the_same_scenario():
    d = {"cores": 1, "policy": {"name": "rr", "quantum": "4ms"},
         "process": [{"name": "a", "burst": "6ms"}, {"name": "b", "burst": "3ms"}]}
    text = 'cores = 1\n[policy]\nname = "rr"\nquantum = "4ms"\n[[process]]\nname = "a"\nburst = "6ms"\n[[process]]\nname = "b"\nburst = "3ms"\n'
    a = schedkit.simulate(schedkit.Scenario.from_dict(d)).threads
    b = schedkit.simulate(schedkit.Scenario.from_toml(text)).threads
    pd.testing.assert_frame_equal(a, b)
    assert a["waiting_ns"].tolist() == [3_000_000, 4_000_000]
