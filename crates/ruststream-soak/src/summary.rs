//! The report of a set of runs: one Markdown table per fault, one row per form.

use std::fmt::Write as _;
use std::path::Path;

use crate::fault::Fault;
use crate::form::Form;
use crate::plan::Report;

/// Reads every `*/report.json` under `dir`.
pub(crate) fn reports(dir: &Path) -> std::io::Result<Vec<Report>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path().join("report.json");
        if let Ok(bytes) = std::fs::read(&path) {
            match serde_json::from_slice(&bytes) {
                Ok(report) => out.push(report),
                Err(error) => eprintln!("soak: {}: {error}", path.display()),
            }
        }
    }
    Ok(out)
}

fn ms(v: Option<u64>) -> String {
    v.map_or_else(
        || "–".to_owned(),
        |ms| format!("{:.2} s", ms as f64 / 1000.0),
    )
}

fn dead(r: &Report) -> String {
    if r.tally.rejected_dead == 0 {
        r.tally.dead.to_string()
    } else {
        format!(
            "{} (and {} originals of `retry_after` copies, rejected into the queue's dead-letter exchange)",
            r.tally.dead, r.tally.rejected_dead
        )
    }
}

/// Markdown tables of the reports, `commit` in every row.
pub(crate) fn markdown(reports: &[Report], commit: &str) -> String {
    let mut out = String::new();
    for fault in Fault::ALL {
        let rows: Vec<&Report> = Form::ALL
            .iter()
            .flat_map(|form| {
                reports
                    .iter()
                    .filter(move |r| r.fault == fault.name() && r.form == form.name())
            })
            .collect();
        if rows.is_empty() {
            continue;
        }
        let _ = writeln!(out, "### {}\n", fault.describe());
        out.push_str(
            "| broker and form | N | faults injected | lost | in-process delayed copies lost on crash | duplicates | dead-lettered | still pending | recovery median / max | longest without a handled message | time | command | commit |\n",
        );
        out.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        for r in rows {
            let form: Form = r.form.parse().unwrap_or(Form::Memory);
            let mut lost = if r.tally.lost_other == 0 {
                "0".to_owned()
            } else {
                format!(
                    "**{}** (ids {:?})",
                    r.tally.lost_other, r.tally.lost_other_ids
                )
            };
            if r.tally.lost_broker > 0 {
                lost.push_str(&format!(
                    " (and {} the broker acknowledged after its last save and lost with its SIGKILL: ids {:?})",
                    r.tally.lost_broker, r.tally.lost_broker_ids
                ));
            }
            if r.tally.passed_over > 0 {
                lost.push_str(&format!(
                    " (and {} stored by the broker where its fetch passed over, never handed to a consumer: ids {:?})",
                    r.tally.passed_over, r.tally.passed_over_ids
                ));
            }
            let delayed = if fault != Fault::Kill {
                format!("{} (no process killed)", r.tally.lost_delayed)
            } else if form.delays_in_process() {
                r.tally.lost_delayed.to_string()
            } else {
                format!("{} (delays are durable)", r.tally.lost_delayed)
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {lost} | {delayed} | {} | {} | {} | {} / {} | {} | {} s | `scripts/soak --n {} --only {}:{}` | {commit} |",
                form.describe(),
                r.n,
                r.faults,
                r.tally.duplicates,
                dead(r),
                r.pending,
                ms(r.tally.recovery_median_ms),
                ms(r.tally.recovery_max_ms),
                ms(r.tally.longest_gap_ms),
                r.seconds,
                r.n,
                r.form,
                r.fault,
            );
        }
        out.push('\n');
    }
    for r in reports
        .iter()
        .filter(|r| !r.passed() && !r.notes.is_empty())
    {
        let _ = writeln!(
            out,
            "{}:{} did not pass; what the harness found:",
            r.form, r.fault
        );
        for note in &r.notes {
            let _ = writeln!(out, "  {note}");
        }
    }
    out
}
