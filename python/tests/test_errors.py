"""Errors are Python exceptions that keep the file, line, column and field."""

import pytest

import schedkit


def test_scenario_errors_carry_their_location(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text('cores = 1\n[policy]\nname = "rr"\nquantum = "0ms"\n')
    with pytest.raises(schedkit.ScenarioError) as e:
        schedkit.Scenario.load(f)
    assert (e.value.file, e.value.line, e.value.column, e.value.field) == (str(f), 4, 11, "policy.quantum")
    assert e.value.message == "must be greater than zero"
    assert str(e.value) == f"{f}:4:11: `policy.quantum`: must be greater than zero"
    assert isinstance(e.value, ValueError)


def test_unknown_keys_and_units():
    with pytest.raises(schedkit.ScenarioError) as e:
        schedkit.Scenario.from_toml('[[process]]\nname = "a"\nbrust = "1ms"\n', file="typo.toml")
    assert (e.value.line, e.value.field) == (3, "brust")
    with pytest.raises(schedkit.ScenarioError) as e:
        schedkit.Scenario.from_toml('[[process]]\nname = "a"\nburst = "8"\n')
    assert e.value.line == 3 and "missing unit" in e.value.message


def test_dict_errors_name_the_field():
    with pytest.raises(schedkit.ScenarioError) as e:
        schedkit.Scenario.from_dict({"process": [{"name": "a", "nice": 40}]})
    assert e.value.field == "process.nice" and e.value.file == "<dict>"


def test_overrides_check_like_the_cli(root):
    sc = schedkit.Scenario.load(root / "examples/textbook/rr.toml")
    with pytest.raises(schedkit.ScenarioError) as e:
        sc.with_policy("fifo")
    assert e.value.field == "policy.name" and e.value.line is None
    with pytest.raises(schedkit.ScenarioError) as e:
        sc.with_horizon(0)
    assert e.value.field == "run.horizon"
    with pytest.raises(schedkit.ScenarioError):
        sc.with_quantum("4")
    # A run-only policy passes the override and is refused by the simulator, as `sim` does.
    with pytest.raises(schedkit.ScenarioError) as e:
        schedkit.simulate(sc.with_policy("exclusive"))
    assert e.value.field == "policy.name"


def test_option_errors(root):
    sc = schedkit.Scenario.load(root / "examples/textbook/rr.toml")
    with pytest.raises(schedkit.OptionError) as e:
        schedkit.compare(sc, ["rr", "nope"])
    assert e.value.option == "policies" and 'unknown policy "nope"' in str(e.value)
    with pytest.raises(schedkit.OptionError) as e:
        schedkit.sweep(sc, seeds=range(3), utilisations=[1.5])
    assert e.value.option == "utilisations"
    with pytest.raises(schedkit.OptionError):
        schedkit.sweep_shard(sc, "seeds=1..4", shard="5/4")
