//! The report as terminal text: an aligned table, the recommendation and the advice's
//! lines (its "Doctor").

use std::fmt::Write as _;

use super::loaders;
use super::model::Report;
use super::roots;
use crate::bench::format::system_line;

/// The report as plain text, as `feedbench report` prints it.
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "feedbench report: {} cells from {} results",
        report.rows.len(),
        report.results
    );
    if let Some(system) = &report.system {
        let _ = writeln!(out, "system: {}", system_line(system));
    }
    if let Some(fixed) = report.fixed_line() {
        let _ = writeln!(out, "fixed: {fixed}");
    }
    out.push('\n');
    out.push_str(&report.table().aligned());
    let legend = format!(
        "loader/model: each phase alone (ceilings); train: the loader feeding the model; \
         input-bound: (wait + h2d) / step, median and p95 over steps{}; * recommended",
        report.newer_legend(str::to_string)
    );
    out.push_str(&wrap(&legend, "", ""));
    if let Some(table) = report.loaders_table() {
        out.push_str("\nBoth loaders, cell by cell:\n");
        out.push_str(&table.aligned());
        out.push_str(&wrap(&loaders::legend(), "", ""));
        out.push_str("Fewest workers keeping the step fed:\n");
        for line in report.fed_lines() {
            out.push_str(&wrap(&line, "  ", "    "));
        }
    }
    if let Some(table) = report.roots_table() {
        out.push_str("\nEvery root of the dataset, cell by cell:\n");
        out.push_str(&table.aligned());
        out.push_str(&wrap(&roots::legend(), "", ""));
    }
    let epochs = report.epoch_lines();
    if !epochs.is_empty() {
        out.push_str("\nFrame cache, epoch by epoch:\n");
        for line in epochs {
            out.push_str(&wrap(&line, "  ", "    "));
        }
    }

    out.push('\n');
    let recommendations: Vec<_> = report.recommendations().collect();
    match recommendations.as_slice() {
        [] => {}
        [(_, rec)] if report.groups.len() == 1 => {
            out.push_str(&wrap(&format!("Recommendation: {}", rec.text), "", "  "));
        }
        many => {
            out.push_str(&wrap(&format!("Recommendation per group ({}):", report.rule()), "", ""));
            for (label, rec) in many {
                out.push_str(&wrap(&format!("{label}: {}", rec.text), "  ", "    "));
            }
        }
    }
    let single = report.groups.len() == 1;
    for (label, d) in report.diagnoses() {
        let head = if single { "Doctor:".to_string() } else { format!("Doctor, {label}:") };
        out.push('\n');
        out.push_str(&wrap(&format!("{head} {}", d.headline), "", "  "));
        out.push_str(&wrap(&d.breakdown, "  ", "  "));
        for advice in &d.advice {
            out.push_str(&wrap(advice, "  - ", "    "));
        }
    }
    out
}

/// Terminal lines are wrapped at this many characters.
const WIDTH: usize = 100;

/// `text` wrapped at [`WIDTH`] on spaces: the first line after `first`, the others after `rest`.
fn wrap(text: &str, first: &str, rest: &str) -> String {
    let mut out = String::new();
    let mut line = first.to_string();
    let mut empty = true;
    // A unit stays on its number's line ("12.0 %").
    let mut words: Vec<String> = Vec::new();
    for word in text.split(' ') {
        match words.last_mut() {
            Some(last) if word.starts_with('%') => {
                last.push(' ');
                last.push_str(word);
            }
            _ => words.push(word.to_string()),
        }
    }
    for word in &words {
        if !empty && line.chars().count() + 1 + word.chars().count() > WIDTH {
            out.push_str(&line);
            out.push('\n');
            line = rest.to_string();
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    out.push_str(&line);
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_on_spaces_with_a_hanging_indent() {
        let text = ["word"; 40].join(" ");
        let wrapped = wrap(&text, "  - ", "    ");
        let lines: Vec<&str> = wrapped.lines().collect();
        assert!(lines.len() > 1 && lines.iter().all(|l| l.chars().count() <= WIDTH), "{wrapped}");
        assert!(lines[0].starts_with("  - word") && lines[1].starts_with("    word"));
        assert_eq!(wrapped.split_whitespace().filter(|w| *w == "word").count(), 40);
        assert_eq!(wrap("short", "", ""), "short\n");
        let percent = wrap(&format!("{} 12.0 %", "x".repeat(WIDTH - 5)), "", "");
        assert!(percent.ends_with("\n12.0 %\n"), "{percent}");
    }
}
