"""compare and sweep give what the CLI's --json gives; shards merge exactly; Dask batches
sum to the local sweep."""

import json

import pytest

import schedkit

SWEEP = ["--sweep", "seeds=1..12", "--utilisations", "0.5,0.9", "--policies", "gedf,pedf",
         "--generator", "uunifast:4"]


def test_compare_equals_the_cli_json(root, cli):
    f = "examples/textbook/rr.toml"
    policies = ["fcfs", "sjf", "srtf", "rr"]
    df = schedkit.compare(schedkit.Scenario.load(f), policies)
    doc = cli("compare", f, "--policies", ",".join(policies), "--json")
    assert list(df.columns) == policies
    for rep in doc["reports"]:
        p = rep["policy"]
        assert df.attrs["reports"][p] == rep
        assert df.loc[("summary", "avg_waiting_ns"), p] == rep["summary"]["avg_waiting_ns"]
        for proc in rep["processes"]:
            assert df.loc[(proc["name"], "share"), p] == proc["share"]
    # The README's summary row: 10.250, 7.500, 7.500, 13.250 ms.
    assert df.loc[("summary", "avg_waiting_ns")].tolist() == [10.25e6, 7.5e6, 7.5e6, 13.25e6]


def _sweep_py(root, seeds, **kw):
    sc = schedkit.Scenario.load("examples/realtime/sweep.toml")
    return schedkit.sweep(sc, seeds=seeds, utilisations=[0.5, 0.9], policies=["gedf", "pedf"],
                          generator="uunifast:4", **kw)


def test_sweep_equals_the_cli_json(root, cli):
    doc = cli("sim", "examples/realtime/sweep.toml", *SWEEP, "--json")
    df = _sweep_py(root, range(1, 13))
    cols = list(doc["rows"][0].keys())
    assert df[cols].to_dict("records") == doc["rows"]
    assert (df["sets"] == 12).all()


def test_cli_shards_merge_into_the_whole_sweep(root, cli, tmp_path):
    whole = cli("sim", "examples/realtime/sweep.toml", *SWEEP, "--json")
    files = []
    for i in (1, 2, 3):
        d = cli("sim", "examples/realtime/sweep.toml", *SWEEP, "--shard", f"{i}/3", "--json")
        assert d["shard"] == f"{i}/3"
        files.append(tmp_path / f"s{i}.json")
        files[-1].write_text(json.dumps(d))
    assert cli("sweep", "merge", *files, "--json") == whole
    assert schedkit.merge_shards(files) == whole
    bad = cli("sweep", "merge", files[0], files[1], "--json", as_json=False, check=False)
    assert bad.returncode == 2 and "shards missing: 3/3" in bad.stderr
    # The same document from Python, shard by shard.
    sc = schedkit.Scenario.load("examples/realtime/sweep.toml")
    py = [schedkit.sweep_shard(sc, "seeds=1..12", [0.5, 0.9], ["gedf", "pedf"], "uunifast:4", f"{i}/3")
          for i in (1, 2, 3)]
    merged = schedkit.merge_shards(py)
    assert merged["rows"] == whole["rows"]


def test_any_seed_set_is_the_sum_of_its_parts(root):
    a = _sweep_py(root, [1, 2, 3, 7, 8])
    b = _sweep_py(root, [9, 10])
    both = _sweep_py(root, [1, 2, 3, 7, 8, 9, 10])
    summed = a[["sets", "jobs", "deadline_misses", "migrations"]] + b[["sets", "jobs", "deadline_misses", "migrations"]]
    assert summed.equals(both[["sets", "jobs", "deadline_misses", "migrations"]])


@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("dask.distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            yield client


def test_dask_local_cluster_equals_the_local_sweep(root, dask_client):
    assert len(dask_client.scheduler_info()["workers"]) == 2
    local = _sweep_py(root, range(1, 41))
    spread = _sweep_py(root, range(1, 41), client=dask_client, batch_size=7)
    assert spread.equals(local)
    # Bad input raises its exception here, before any batch is sent.
    sc = schedkit.Scenario.load("examples/realtime/sweep.toml")
    with pytest.raises(schedkit.OptionError):
        schedkit.sweep(sc, seeds=range(3), utilisations=[2.0], client=dask_client)
