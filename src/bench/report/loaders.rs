//! Both loaders side by side, where a sweep measured its cells with the native loader and with
//! LeRobot's: per cell (workers × prefetch × batch and the other knobs) each loader's
//! throughput, CPU per sample and input-bound share with the ratios, and per group of cells
//! the fewest workers with which each keeps the step fed.

use super::compared::{Fed, FedGroup, LoaderComparison, LoaderPair};
use super::model::{Report, Row};
use crate::bench::format::{millis, plural, rate};
use crate::bench::report::table::{Column, Table};
use crate::bench::sweep::cell::Knob;
use crate::bench::sweep::cell::KnobSet;
use crate::loader::lerobot::LoaderBackend;
use crate::measure::verdict::{Verdict, MODERATELY_INPUT_BOUND_PCT};

/// The comparison of `rows`, where some cells were measured with both loaders.
pub(super) fn compare(rows: &[Row]) -> Option<LoaderComparison> {
    let pairs: Vec<LoaderPair> = rows
        .iter()
        .enumerate()
        .filter(|(_, row)| row.knobs.loader == LoaderBackend::Native)
        .filter_map(|(native, row)| {
            // LeRobot's loader keeps no frames and has no decoder threads: a native cell with
            // either is set beside the LeRobot cell without them.
            let twin = row.knobs.lerobot_twin();
            let lerobot = rows.iter().position(|r| r.knobs == twin)?;
            Some(LoaderPair { native, lerobot })
        })
        .collect();
    if pairs.is_empty() {
        return None;
    }
    let shared: Vec<Knob> =
        Knob::set(KnobSet::Group).into_iter().filter(|&k| k != Knob::Backend).collect();
    let paired: Vec<usize> = pairs.iter().flat_map(|p| [p.native, p.lerobot]).collect();
    let fed = super::model::partition(rows, &shared)
        .into_iter()
        .filter_map(|(label, members)| {
            let of = |loader| {
                let members: Vec<&Row> = members
                    .iter()
                    .filter(|&i| paired.contains(i))
                    .map(|&i| &rows[i])
                    .filter(|r| r.knobs.loader == loader)
                    .collect();
                fed(&members)
            };
            Some(FedGroup {
                label,
                native: of(LoaderBackend::Native)?,
                lerobot: of(LoaderBackend::Lerobot)?,
            })
        })
        .collect();
    Some(LoaderComparison { pairs, fed })
}

/// The fewest workers among `rows` keeping the step fed; None without rows.
fn fed(rows: &[&Row]) -> Option<Fed> {
    let least = rows.iter().min_by(|a, b| {
        a.input_bound_pct
            .total_cmp(&b.input_bound_pct)
            .then(a.knobs.knobs.workers.cmp(&b.knobs.knobs.workers))
    })?;
    Some(Fed {
        workers: rows
            .iter()
            .filter(|r| r.verdict == Verdict::NotInputBound)
            .map(|r| r.knobs.knobs.workers)
            .min(),
        least_input_bound: (least.knobs.knobs.workers, least.input_bound_pct),
        most_workers: rows.iter().map(|r| r.knobs.knobs.workers).max().unwrap_or(0),
    })
}

impl Fed {
    /// `2 workers`, or `none up to 4 workers (least input-bound: 49.0 % at 4)`.
    pub fn text(&self) -> String {
        match self.workers {
            Some(w) => format!("{w} worker{}", plural(w)),
            None => format!(
                "none up to {} worker{} (least input-bound: {:.1} % at {})",
                self.most_workers,
                plural(self.most_workers),
                self.least_input_bound.1,
                self.least_input_bound.0
            ),
        }
    }
}

impl Report {
    /// The side-by-side table of both loaders: one row per cell measured with both. None where
    /// the sweep measured none with both.
    pub(crate) fn loaders_table(&self) -> Option<Table> {
        let comparison = self.loaders.as_ref()?;
        let mut columns = ["workers", "prefetch", "batch"].map(Column::number).to_vec();
        let others: Vec<Knob> =
            self.varying.iter().copied().filter(|&k| k != Knob::Backend).collect();
        columns.extend(others.iter().map(|k| Column::text(k.name())));
        for header in [
            "native/s",
            "LeRobot/s",
            "native ÷ LeRobot",
            "native CPU ms",
            "LeRobot CPU ms",
            "LeRobot ÷ native",
            "native train/s",
            "LeRobot train/s",
            "native in-bound %",
            "LeRobot in-bound %",
        ] {
            columns.push(Column::number(header));
        }
        let rows = comparison
            .pairs
            .iter()
            .map(|pair| {
                let (n, l) = (&self.rows[pair.native], &self.rows[pair.lerobot]);
                let mut line = vec![
                    n.knobs.knobs.workers.to_string(),
                    n.knobs.knobs.prefetch.to_string(),
                    n.knobs.knobs.batch_size.to_string(),
                ];
                line.extend(others.iter().map(|k| k.value(&n.knobs)));
                // A sweep measures every cell's loader alone; "-" where a row was not.
                let alone = |x: Option<f64>| x.unwrap_or(f64::NAN);
                let (n_rate, l_rate) =
                    (alone(n.loader_samples_per_s), alone(l.loader_samples_per_s));
                let (n_cpu, l_cpu) =
                    (alone(n.loader_cpu_ms_per_sample), alone(l.loader_cpu_ms_per_sample));
                let cpu = |x: f64| if x.is_finite() { millis(x) } else { "-".into() };
                line.extend([
                    rate(n_rate),
                    rate(l_rate),
                    times(n_rate / l_rate),
                    cpu(n_cpu),
                    cpu(l_cpu),
                    times(l_cpu / n_cpu),
                    rate(n.train_samples_per_s),
                    rate(l.train_samples_per_s),
                    format!("{:.1}", n.input_bound_pct),
                    format!("{:.1}", l.input_bound_pct),
                ]);
                line
            })
            .collect();
        Some(Table { columns, rows })
    }

    /// One sentence per group: the fewest workers with which each loader keeps the step fed.
    pub(crate) fn fed_lines(&self) -> Vec<String> {
        let Some(comparison) = &self.loaders else { return Vec::new() };
        comparison
            .fed
            .iter()
            .map(|g| {
                let label =
                    if g.label.is_empty() { String::new() } else { format!("{}: ", g.label) };
                format!("{label}native {}, LeRobot {}", g.native.text(), g.lerobot.text())
            })
            .collect()
    }
}

/// The legend of the side-by-side table.
pub(crate) fn legend() -> String {
    format!(
        "native/s, LeRobot/s: the loader phase alone; CPU ms: CPU per sample over every thread \
         and process of the loader; train/s and in-bound %: the loader feeding the same step \
         (each pays its own copy to the device); fed: input-bound below \
         {MODERATELY_INPUT_BOUND_PCT:.0} %"
    )
}

/// A ratio as `3.4×`; `-` where it is not finite.
fn times(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.1}×")
    } else {
        "-".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::report::{markdown, render, terminal};
    use crate::loader::knobs::LoaderKnob;
    use crate::testdata::FakeCell;

    /// A cell of `loader` at `workers` (batch 16): loader samples/s, CPU scale, input-bound %.
    fn cell(loader: LoaderBackend, workers: usize, rate: f64, cpu: f64, bound: f64) -> FakeCell {
        let mut c = FakeCell::new(workers, 2, 16);
        c.cell.loader = loader;
        c.loader_samples_per_s = rate;
        c.stages_ms = c.stages_ms.iter().map(|&(stage, ms)| (stage, ms * cpu)).collect();
        c.input_bound_pct = bound;
        c
    }

    #[test]
    fn a_cached_cell_says_what_each_epoch_gave_beside_lerobots_which_decodes_every_epoch() {
        use crate::measure::phase::CacheFigures;
        use LoaderBackend::{Lerobot, Native};
        let figures = |later: Option<f64>| CacheFigures {
            budget_bytes: 4 << 30,
            held_bytes: 1 << 30,
            frames: 100,
            hit_pct: 80.0,
            first_epoch_samples_per_s: Some(200.0),
            later_epochs_samples_per_s: later,
        };
        let mut cached = cell(Native, 2, 300.0, 1.0, 2.0);
        cached.cell.knobs.cache_bytes = 4 << 30;
        cached.cache = Some(figures(Some(2000.0)));
        let mut short = cell(Native, 1, 150.0, 1.0, 10.0);
        short.cell.knobs.cache_bytes = 4 << 30;
        short.cache = Some(figures(None));
        let cells = [cached, short, cell(Lerobot, 2, 30.0, 8.0, 45.0)];
        let results: Vec<_> = cells.iter().map(FakeCell::result).collect();
        let report = render(&results);
        let lines = report.epoch_lines();
        assert_eq!(lines.len(), 2, "{lines:?}");
        // Each row named by the sweep's table of knobs.
        let two = lines.iter().find(|l| l.starts_with("workers 2")).unwrap();
        assert!(
            two.starts_with(
                "workers 2, prefetch 2, batch 16, cache 4GiB: epoch 1 200 samples/s, later \
                 epochs 2000 (10.0×); 80 % of the frames written were copied from the cache; \
                 LeRobot's loader decodes every epoch: 30.0 samples/s"
            ),
            "{two}"
        );
        let one = lines.iter().find(|l| l.starts_with("workers 1,")).unwrap();
        assert!(one.contains("later epochs not reached by the loader phase"), "{one}");
        assert!(!one.contains("LeRobot"), "no twin measured: {one}");
        assert!(terminal::render(&report).contains("Frame cache, epoch by epoch:"));
        assert!(markdown::render(&report).contains("## Frame cache, epoch by epoch"));
    }

    #[test]
    fn each_cell_measured_with_both_loaders_is_set_beside_its_twin() {
        use LoaderBackend::{Lerobot, Native};
        let cells = [
            cell(Native, 0, 100.0, 1.0, 40.0),
            cell(Native, 1, 150.0, 1.0, 10.0),
            cell(Native, 2, 300.0, 1.0, 2.0),
            cell(Native, 3, 310.0, 1.0, 1.0), // LeRobot's was not measured at 3 workers
            cell(Lerobot, 0, 20.0, 8.0, 80.0),
            cell(Lerobot, 1, 30.0, 8.0, 60.0),
            cell(Lerobot, 2, 50.0, 8.0, 45.0),
        ];
        let results: Vec<_> = cells.iter().map(FakeCell::result).collect();
        let report = render(&results);
        let comparison = report.loaders.as_ref().expect("both loaders measured");
        assert_eq!(comparison.pairs.len(), 3, "the 3-worker cell has no twin");
        // A native cell with decoder threads is set beside LeRobot's, as a cached one is.
        let mut threaded = cell(Native, 1, 150.0, 1.0, 10.0);
        LoaderKnob::DECODER_THREADS.set(&mut threaded.cell.knobs, "2").unwrap();
        let both: Vec<_> =
            [threaded, cell(Lerobot, 1, 30.0, 8.0, 60.0)].iter().map(FakeCell::result).collect();
        let pairs = render(&both).loaders.expect("a twin").pairs.len();
        assert_eq!(pairs, 1, "decoder threads have a LeRobot twin");
        for pair in &comparison.pairs {
            let (n, l) = (&report.rows[pair.native], &report.rows[pair.lerobot]);
            assert_eq!((n.knobs.loader, l.knobs.loader), (Native, Lerobot));
            assert_eq!(n.knobs.knobs.workers, l.knobs.knobs.workers);
        }
        let Table { columns, rows } = report.loaders_table().unwrap();
        let at = |header: &str| columns.iter().position(|c| c.header == header).unwrap();
        let two = rows.iter().find(|l| l[at("workers")] == "2").unwrap();
        assert_eq!(two[at("native ÷ LeRobot")], "6.0×");
        assert_eq!(two[at("LeRobot ÷ native")], "8.0×");
        assert_eq!(
            (two[at("native in-bound %")].as_str(), two[at("LeRobot in-bound %")].as_str()),
            ("2.0", "45.0")
        );
        assert_eq!(
            report.fed_lines(),
            ["native 2 workers, LeRobot none up to 2 workers (least input-bound: 45.0 % at 2)"]
        );
        assert!(terminal::render(&report).contains("Both loaders, cell by cell:"));
        assert!(markdown::render(&report).contains("## Both loaders"));
        // One plot pair, a line and a heatmap row per loader.
        let dir = tempfile::tempdir().unwrap();
        let written = crate::bench::report::write_report(dir.path(), &results).unwrap();
        let svgs: Vec<_> =
            written.files.iter().filter(|f| f.extension().is_some_and(|e| e == "svg")).collect();
        assert_eq!(svgs.len(), 2, "{svgs:?}");
        let train = std::fs::read_to_string(dir.path().join("train_vs_workers.svg")).unwrap();
        assert!(
            train.contains("train, batch 16, native") && train.contains("train, batch 16, LeRobot")
        );
        assert_eq!(train.matches("model ceiling, batch 16").count(), 1, "one shared ceiling");
        let heatmap = std::fs::read_to_string(dir.path().join("input_bound_heatmap.svg")).unwrap();
        assert!(heatmap.contains("16, native") && heatmap.contains("16, LeRobot"));

        // No cell had a cache: no epoch lines.
        assert!(report.epoch_lines().is_empty());
        assert!(!terminal::render(&report).contains("Frame cache"));

        // A sweep of the native loader alone has no such block.
        let native = render(&results[..4]);
        assert!(native.loaders.is_none() && native.loaders_table().is_none());
        assert!(!terminal::render(&native).contains("Both loaders"));
    }
}
