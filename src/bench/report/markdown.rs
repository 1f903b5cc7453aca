//! The report as Markdown (`report.md`): the same content as the terminal text, for pull
//! requests and CI summaries, with the plots linked.

use std::fmt::Write as _;

use super::loaders;
use super::model::{Report, MARKDOWN_FILE};
use super::roots;
use crate::bench::export::{Exporter, Markdown, Output, RenderError};
use crate::bench::format::system_line;
use crate::bench::report::table::escape_markdown as escape;
use crate::measure::verdict::{HIGHLY_INPUT_BOUND_PCT, MODERATELY_INPUT_BOUND_PCT};

impl Exporter<Report> for Markdown {
    fn export(&self, report: &Report) -> Result<Vec<Output>, RenderError> {
        Ok(vec![Output::new(MARKDOWN_FILE, render(report))])
    }
}

/// The report as a Markdown document.
pub fn render(report: &Report) -> String {
    let mut out = String::from("# feedbench report\n\n");
    let _ = writeln!(out, "{} cells from {} results.\n", report.rows.len(), report.results);
    if let Some(system) = &report.system {
        let _ = writeln!(out, "**System:** {}\n", escape(&system_line(system)));
    }
    if let Some(fixed) = report.fixed_line() {
        let _ = writeln!(out, "**Fixed:** {}\n", escape(&fixed));
    }

    out.push_str(&report.table().markdown());
    let _ = writeln!(
        out,
        "\n*loader* and *model*: each phase alone (the ceilings, samples/s); *train*: the loader \
         feeding the model; *input-bound*: (wait + host→device) / step, median and p95 over \
         steps — highly input-bound from {HIGHLY_INPUT_BOUND_PCT:.0} %, moderately from \
         {MODERATELY_INPUT_BOUND_PCT:.0} %{}; `*` marks the recommended rows.\n",
        report.newer_legend(|name| format!("*{name}*"))
    );

    comparisons(report, &mut out);
    out.push_str("## Recommendation\n\n");
    let single = report.groups.len() == 1;
    if single {
        for (_, rec) in report.recommendations() {
            let _ = writeln!(out, "{}\n", escape(&rec.text));
        }
    } else {
        let _ = writeln!(out, "Per group: {}.\n", report.rule());
        for (label, rec) in report.recommendations() {
            let _ = writeln!(out, "- **{}**: {}", escape(label), escape(&rec.text));
        }
        out.push('\n');
    }

    doctor(report, &mut out, single);
    out.push_str("## Plots\n\n");
    for plot in &report.plots {
        let label =
            if plot.label.is_empty() { String::new() } else { format!(" ({})", plot.label) };
        let _ = writeln!(
            out,
            "![train samples/s against workers{label}]({})\n\n![input-bound % over workers × batch{label}]({})\n",
            plot.train_file, plot.heatmap_file
        );
    }
    out
}

/// The report's comparisons, where it has them: both loaders, every root, the frame cache
/// epoch by epoch.
fn comparisons(report: &Report, out: &mut String) {
    if let Some(table) = report.loaders_table() {
        out.push_str("## Both loaders\n\n");
        out.push_str(&table.markdown());
        let _ = writeln!(out, "\n{}.\n", escape(&loaders::legend()));
        out.push_str("Fewest workers keeping the step fed:\n\n");
        for line in report.fed_lines() {
            let _ = writeln!(out, "- {}", escape(&line));
        }
        out.push('\n');
    }
    if let Some(table) = report.roots_table() {
        out.push_str("## Every root of the dataset\n\n");
        out.push_str(&table.markdown());
        let _ = writeln!(out, "\n{}.\n", escape(&roots::legend()));
    }
    let epochs = report.epoch_lines();
    if !epochs.is_empty() {
        out.push_str("## Frame cache, epoch by epoch\n\n");
        for line in epochs {
            let _ = writeln!(out, "- {}", escape(&line));
        }
        out.push('\n');
    }
}

/// The "Loader doctor": each group's diagnosis (headed by its label where there are several).
fn doctor(report: &Report, out: &mut String, single: bool) {
    out.push_str("## Loader doctor\n\n");
    for (label, d) in report.diagnoses() {
        if !single {
            let _ = writeln!(out, "### {}\n", escape(label));
        }
        let _ = writeln!(out, "{}\n", escape(&d.headline));
        let _ = writeln!(out, "{}\n", escape(&d.breakdown));
        for advice in &d.advice {
            let _ = writeln!(out, "- {}", escape(advice));
        }
        if !d.advice.is_empty() {
            out.push('\n');
        }
    }
}
