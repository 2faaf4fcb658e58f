"""`--parquet DIR` writes tables that pandas reads without schedkit, equal to the DataFrames."""

import pandas as pd

import schedkit


def test_sim_parquet_equals_the_dataframes(cli, tmp_path):
    cli("sim", "examples/quickstart.toml", "--parquet", tmp_path, as_json=False)
    r = schedkit.simulate(schedkit.Scenario.load("examples/quickstart.toml"))
    for name in ["summary", "threads", "processes", "groups"]:
        got = pd.read_parquet(tmp_path / f"{name}.parquet")
        want = getattr(r, name)
        assert list(got.columns) == list(want.columns), name
        assert got.astype(object).where(got.notna(), None).values.tolist() == \
            want.astype(object).where(want.notna(), None).values.tolist(), name
    iv = pd.read_parquet(tmp_path / "intervals.parquet")
    assert iv["end_ns"].dtype == "int64"
    assert iv[["start_ns", "end_ns"]].values.tolist() == r.intervals()[["start_ns", "end_ns"]].values.tolist()


def test_compare_and_sweep_parquet(cli, tmp_path):
    cli("compare", "examples/textbook/rr.toml", "--policies", "fcfs,rr", "--parquet", tmp_path / "c",
        as_json=False)
    th = pd.read_parquet(tmp_path / "c/threads.parquet")
    assert th.columns[0] == "policy" and sorted(set(th["policy"])) == ["fcfs", "rr"]
    s = pd.read_parquet(tmp_path / "c/summary.parquet")
    assert s.set_index("policy")["avg_waiting_ns"].to_dict() == {"fcfs": 10_250_000, "rr": 13_250_000}
    doc = cli("sim", "examples/realtime/sweep.toml", "--sweep", "seeds=1..4", "--utilisations", "0.5",
              "--generator", "uunifast:4", "--json", "--parquet", tmp_path / "s")
    sw = pd.read_parquet(tmp_path / "s/sweep.parquet")
    assert sw.to_dict("records") == doc["rows"]
