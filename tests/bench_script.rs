//! The benchmark scripts' own logic, checked without running a benchmark:
//! scripts/bench's verdicts (issue #11's goals) on made-up rounds
//! (tests/python/bench_goals.py: medians of ratios paired within a round,
//! met or not met only where a sign test over the rounds decides it and
//! undecided otherwise, full capture's dropped events, ÷ nghttpd on the
//! 1 MiB workloads only), and scripts/instructions' readers of callgrind
//! and perf output (tests/python/instructions_parse.py).

mod support;

/// Runs `check` (a Python file under tests/python) on `script` (under
/// scripts/); its stdout, or `None` when python3 is missing (said loudly).
fn python_check(check: &str, script: &str) -> Option<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = match std::process::Command::new("python3")
        .arg(root.join("tests/python").join(check))
        .arg(root.join("scripts").join(script))
        .output()
    {
        Ok(o) => o,
        Err(e) => {
            support::missing(&format!("python3 ({e})"));
            return None;
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{check}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(stdout)
}

#[test]
fn the_benchmark_judges_a_goal_only_where_its_rounds_decide_it() {
    let Some(table) = python_check("bench_goals.py", "bench") else {
        return;
    };
    assert!(
        table.contains("| 16 KiB POSTs, -c4 -m10 | 0.91 undecided (3/5) |"),
        "{table}"
    );
}

/// A callgrind dump's total, `perf stat` counts with an event perf cannot
/// count left out (not read as 0), and the workloads taken from scripts/bench.
#[test]
fn the_instructions_benchmark_reads_callgrind_and_perf_output() {
    let Some(said) = python_check("instructions_parse.py", "instructions") else {
        return;
    };
    assert_eq!(said.trim(), "ok");
}
