use super::*;
use crate::time::Nanos;

fn err(text: &str) -> ScenarioError {
    Scenario::parse("t.toml", text).unwrap_err()
}

#[test]
fn minimal() {
    let s = Scenario::parse(
        "t.toml",
        "cores = 2\n[policy]\nname = \"rr\"\nquantum = \"4ms\"\n[[process]]\nname = \"a\"\nburst = \"8ms\"\n",
    )
    .unwrap();
    assert_eq!(s.cores, 2);
    assert_eq!(s.policy.quantum, Nanos::from_ms(4));
    assert_eq!(s.processes[0].burst, Some(Nanos::from_ms(8)));
    assert_eq!(s.processes[0].weight(), 1024);
}

#[test]
fn trim_is_on_unless_turned_off_and_must_be_a_boolean() {
    let base = "cores = 2\n[policy]\nname = \"process-fair\"\n";
    assert!(Scenario::parse("t.toml", base).unwrap().policy.trim);
    let off = Scenario::parse("t.toml", &format!("{base}trim = false\n")).unwrap();
    assert!(!off.policy.trim);
    let e = err(&format!("{base}trim = \"no\"\n"));
    assert_eq!(e.line, 4, "{e}");
    assert!(e.to_string().contains("trim"), "{e}");
}

#[test]
fn errors_are_located() {
    let e = err("cores = 2\n[policy]\nname = \"rr\"\nquantum = \"0ms\"\n");
    assert_eq!((e.line, e.field.as_str()), (4, "policy.quantum"));
    let e = err("[policy]\nname = \"nope\"\n");
    assert_eq!((e.line, e.field.as_str()), (2, "policy.name"));
    let e = err("[[process]]\nname = \"a\"\nburst = \"8\"\n");
    assert_eq!(e.line, 3);
    assert_eq!(e.field, "burst");
    assert!(e.message.contains("missing unit"), "{e}");
    let e = err("[[process]]\nname = \"a\"\nbogus = 1\n");
    assert_eq!(e.field, "bogus");
    assert_eq!(e.line, 3);
    let e = err("[[process]]\nname = \"a\"\n[[process]]\nname = \"a\"\n");
    assert_eq!((e.line, e.field.as_str()), (4, "process.name"));
    let e = err("[[process]]\nname = \"a\"\ngroup = \"g\"\n");
    assert_eq!((e.line, e.field.as_str()), (3, "process.group"));
    let e = err("cores = 2\n[[process]]\nname = \"a\"\ncpus = [2]\n");
    assert_eq!((e.line, e.field.as_str()), (4, "process.cpus"));
    let e = err("[[process]]\nname = \"a\"\nburst = \"-3ms\"\n");
    assert!(e.message.contains("negative"), "{e}");
    let e = err("[policy]\nname = \"rr\"\nquantum = \"-4ms\"\n");
    assert_eq!((e.line, e.field.as_str()), (3, "quantum"));
}

#[test]
fn a_process_class_parses_and_an_unknown_one_is_located() {
    let s = Scenario::parse("t.toml", "[[process]]\nname = \"a\"\nclass = \"fifo\"\n").unwrap();
    assert_eq!(s.processes[0].class(), Class::Fifo);
    let s = Scenario::parse("t.toml", "[[process]]\nname = \"a\"\n").unwrap();
    assert_eq!(s.processes[0].class(), Class::Other);
    // Kept through a builder (the fidelity experiment adds a process this way).
    let s = s
        .to_builder()
        .process(Process::new("b", 1, Work::Spin).with_class(Class::Fifo))
        .build()
        .unwrap();
    assert_eq!(s.processes[1].class(), Class::Fifo);
    let e = err("[[process]]\nname = \"a\"\nclass = \"rt\"\n");
    assert_eq!((e.line, e.field.as_str()), (3, "process.class"));
    assert!(e.message.contains("other, fifo"), "{e}");
}

#[test]
fn the_wake_path_parses_zero_is_allowed_and_a_bad_one_is_located() {
    let s = Scenario::parse(
        "t.toml",
        "[policy]\nname = \"eevdf\"\nwake_path = \"17us\"\n[[process]]\nname = \"a\"\n",
    )
    .unwrap();
    assert_eq!(s.policy().wake_path(), Nanos::from_us(17));
    let s = Scenario::parse(
        "t.toml",
        "[policy]\nname = \"eevdf\"\nwake_path = \"0us\"\n[[process]]\nname = \"a\"\n",
    )
    .unwrap();
    assert_eq!(s.policy().wake_path(), Nanos::ZERO);
    let s = Scenario::parse("t.toml", "[[process]]\nname = \"a\"\n").unwrap();
    assert_eq!(s.policy().wake_path(), DEFAULT_WAKE_PATH);
    // Kept through a builder, and left out of a serialised scenario at its default.
    let b = s.to_builder().build().unwrap();
    assert_eq!(b.policy().wake_path(), DEFAULT_WAKE_PATH);
    assert!(!serde_json::to_string(b.policy())
        .unwrap()
        .contains("wake_path"));
    let e = err("[policy]\nname = \"eevdf\"\nwake_path = \"soon\"\n[[process]]\nname = \"a\"\n");
    assert_eq!(e.line, 3, "{e}");
    assert!(e.field.contains("wake_path"), "{e}");
}

#[test]
fn the_task_group_and_the_spawner_parse_and_a_spawner_must_name_a_process() {
    let s = Scenario::parse("t.toml", "[[process]]\nname = \"a\"\n").unwrap();
    assert!(s.policy().task_group());
    assert_eq!(s.policy().spawner(), None);
    let text = "[policy]\nname = \"eevdf\"\ntask_group = false\nspawner = \"eng\"\n\
                [[process]]\nname = \"a\"\n[[process]]\nname = \"eng\"\n";
    let s = Scenario::parse("t.toml", text).unwrap();
    assert!(!s.policy().task_group());
    assert_eq!(s.policy().spawner(), Some("eng"));
    // Kept through a builder; left out of a serialised scenario at their defaults.
    let b = s.to_builder().build().unwrap();
    assert_eq!(b.policy(), s.policy());
    let plain = Scenario::parse("t.toml", "[[process]]\nname = \"a\"\n").unwrap();
    let json = serde_json::to_string(plain.policy()).unwrap();
    assert!(
        !json.contains("task_group") && !json.contains("spawner"),
        "{json}"
    );
    // A spawner that is no process: located, with the closest name.
    let e = err("[policy]\nname = \"eevdf\"\nspawner = \"engn\"\n[[process]]\nname = \"engine\"\n");
    assert_eq!(e.line, 3, "{e}");
    assert_eq!(e.field, "policy.spawner", "{e}");
    assert!(e.to_string().contains("engine"), "{e}");
    let e = err("[policy]\nname = \"eevdf\"\ntask_group = 1\n[[process]]\nname = \"a\"\n");
    assert_eq!(e.line, 3, "{e}");
}

#[test]
fn patterns_parse_and_errors_are_located() {
    let base = "[[process]]\nname = \"s\"\n";
    let s = Scenario::parse(
        "t.toml",
        &format!("{base}pattern = [{{ run = \"2ms\" }}, {{ sleep = \"8ms\" }}]\n"),
    )
    .unwrap();
    assert_eq!(
        s.processes[0].pattern,
        Some(vec![
            Phase::Run(Nanos::from_ms(2)),
            Phase::Sleep(Nanos::from_ms(8))
        ])
    );
    for (text, field) in [
        ("pattern = []\n", "process.pattern"),
        ("pattern = [{ sleep = \"8ms\" }]\n", "process.pattern"),
        ("pattern = [{ run = \"0ms\" }]\n", "process.pattern.run"),
        (
            "pattern = [{ run = \"1ms\", sleep = \"1ms\" }]\n",
            "process.pattern",
        ),
        ("pattern = [{ run = \"1ms\" }, { nap = \"1ms\" }]\n", "nap"),
        (
            "work = \"barrier\"\npattern = [{ run = \"1ms\" }]\n",
            "process.pattern",
        ),
    ] {
        let e = err(&format!("{base}{text}"));
        assert_eq!(e.field, field, "{text}: {e}");
        assert!(e.line >= 3, "{text}: {e}");
    }
    let e = err(&format!("{base}pattern = [{{ run = \"2\" }}]\n"));
    assert_eq!(e.line, 3, "{e}");
    assert!(e.message.contains("missing unit"), "{e}");
}

#[test]
fn tasks() {
    let s = Scenario::parse(
        "t.toml",
        "[[task]]\nname = \"t1\"\nperiod = \"100ms\"\nregions = [{ seq = \"2ms\" }, { par = [\"3ms\", \"1ms\", \"4ms\"] }, { seq = \"1ms\" }]\n",
    )
    .unwrap();
    let t = &s.tasks[0];
    assert_eq!(t.deadline, Nanos::from_ms(100));
    assert_eq!(t.work(), Nanos::from_ms(11));
    assert_eq!(t.critical_path(), Nanos::from_ms(7));
    let e = err("[[task]]\nname = \"t1\"\nperiod = \"10ms\"\nregions = [{ seq = \"1ms\", par = [\"1ms\"] }]\n");
    assert_eq!(e.field, "task.regions");
}
