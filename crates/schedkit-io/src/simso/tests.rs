use super::*;

/// Written by SimSo 0.8.5's `Configuration.save` (two processors, global EDF, two tasks).
const SAVED: &str = include_str!("../../tests/data/simso-edf-2cpu.xml");

#[test]
fn a_saved_configuration_imports() {
    let imp = import("edf.xml", SAVED).unwrap();
    let s = Scenario::parse("edf.toml", &imp.toml).unwrap();
    assert_eq!(s.cores(), 2);
    assert_eq!(s.policy().name(), PolicyName::Gedf);
    assert_eq!(s.horizon(), Nanos::from_ms(420));
    assert_eq!(s.tasks().len(), 2);
    let t2 = &s.tasks()[1];
    assert_eq!(
        (t2.period(), t2.deadline(), t2.offset()),
        (Nanos::from_ms(12), Nanos::from_ms(11), Nanos::from_ms(1))
    );
    assert_eq!(t2.work(), Nanos::from_ms(3));
    assert!(
        imp.warnings.iter().any(|w| w.contains("abort_on_miss")),
        "{:?}",
        imp.warnings
    );
}

#[test]
fn what_schedkit_does_not_model_is_a_located_error() {
    let cases = [
        (
            "task_type=\"Periodic\"",
            "task_type=\"Sporadic\"",
            "task.task_type",
            "periodic tasks only",
        ),
        (
            "class=\"simso.schedulers.EDF\"",
            "class=\"simso.schedulers.LLF\"",
            "sched.class",
            "no schedkit policy",
        ),
        (
            "cs_overhead=\"0\"",
            "cs_overhead=\"5\"",
            "processor.cs_overhead",
            "context-switch overhead",
        ),
        (
            "speed=\"1.0\"",
            "speed=\"2.0\"",
            "processor.speed",
            "speed 1",
        ),
        ("etm=\"wcet\"", "etm=\"acet\"", "simulation.etm", "WCET"),
        (
            "period=\"7\"",
            "period=\"-7\"",
            "task.period",
            "greater than zero",
        ),
        ("WCET=\"3\"", "WCET=\"x\"", "task.WCET", "not a number"),
    ];
    for (from, to, field, needle) in cases {
        let text = SAVED.replacen(from, to, 1);
        assert_ne!(text, SAVED, "{from}");
        let e = import("bad.xml", &text).unwrap_err();
        let Error::Scenario(e) = e else { panic!("{e}") };
        assert_eq!(e.field, field, "{e}");
        assert!(e.message.contains(needle), "{e}");
        assert!(e.line >= 2 && e.column >= 1, "{e}");
        // The line named is the line that holds the attribute.
        let line = text.lines().nth(e.line - 1).unwrap();
        let attr = field.rsplit('.').next().unwrap();
        assert!(line.contains(&format!("{attr}=")), "{e}: {line}");
    }
    let e = import("bad.xml", "<simulation><oops></simulation>")
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("bad.xml:1:"), "{e}");
}

#[test]
fn global_rm_on_several_processors_is_refused() {
    let text = SAVED.replace("simso.schedulers.EDF", "simso.schedulers.RM");
    let e = import("rm.xml", &text).unwrap_err().to_string();
    assert!(e.contains("one processor"), "{e}");
}

#[test]
fn export_round_trips_the_periodic_subset() {
    let s = Scenario::parse("edf.toml", &import("edf.xml", SAVED).unwrap().toml).unwrap();
    let xml = export(&s).unwrap();
    assert!(xml.contains("cycles_per_ms=\"1000000\""));
    assert!(xml.contains("duration=\"420000000\""));
    let back = Scenario::parse("back.toml", &import("back.xml", &xml).unwrap().toml).unwrap();
    // Equal but for the line numbers, which are the generated files' own.
    let key = |s: &Scenario| -> Vec<_> {
        s.tasks()
            .iter()
            .map(|t| {
                (
                    t.name().to_string(),
                    t.period(),
                    t.deadline(),
                    t.offset(),
                    t.regions().to_vec(),
                )
            })
            .collect()
    };
    assert_eq!(key(&back), key(&s));
    assert_eq!(
        (back.cores(), back.policy().name(), back.horizon()),
        (s.cores(), s.policy().name(), s.horizon())
    );

    let p = Scenario::parse("p.toml", "[[process]]\nname = \"a\"\nburst = \"1ms\"\n").unwrap();
    let e = export(&p).unwrap_err().to_string();
    assert!(e.starts_with("p.toml:1:1: `process`"), "{e}");
    let fj = Scenario::parse(
        "fj.toml",
        "cores = 2\n[policy]\nname = \"gedf\"\n[[task]]\nname = \"f\"\nperiod = \"10ms\"\nregions = [{ par = [\"1ms\", \"2ms\"] }]\n",
    )
    .unwrap();
    assert!(export(&fj).unwrap_err().to_string().contains("sequential"));
    assert_eq!(ms(Nanos(2_500_000)), "2.5");
    assert_eq!(ms(Nanos(7)), "0.000007");
}
