//! scripts/bench's verdicts (issue #11's goals, met or not) checked on
//! made-up rounds: tests/python/bench_goals.py loads the script and judges
//! its `goal_table` (medians of ratios paired within a round, full capture's
//! dropped events, ÷ nghttpd on the 1 MiB workloads only).

mod support;

#[test]
fn the_benchmarks_goal_verdicts_are_medians_of_paired_ratios() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = match std::process::Command::new("python3")
        .arg(root.join("tests/python/bench_goals.py"))
        .arg(root.join("scripts/bench"))
        .output()
    {
        Ok(o) => o,
        Err(e) => {
            support::missing(&format!("python3 ({e})"));
            return;
        }
    };
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("| 16 KiB POSTs, -c4 -m10 | 0.91 met |"),
        "{table}"
    );
}
