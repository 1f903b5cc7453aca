//! The memory a configuration holds: its proportional set size (PSS: a page shared by several
//! processes counted once, split between them) read a few times over its measured steps, for
//! the whole process tree (the loader's process and its DataLoader workers; every rank's).
//! Its level is the steady state's, its slope over the steps tells a leak from noise.

use serde::{Deserialize, Serialize};

/// One read of the tree's PSS.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PssSample {
    /// Seconds since the measured steps began.
    pub at_s: f64,
    /// The loader's (and the step's) process, bytes.
    pub main_bytes: u64,
    /// Each worker process, bytes (none where the workers are threads of the main process).
    pub worker_bytes: Vec<u64>,
    /// The anonymous memory of the whole tree, bytes: a leak grows it, and unlike the PSS it
    /// does not rise when another process that shared pages with the tree (a library) exits.
    pub anonymous_bytes: u64,
}

impl PssSample {
    /// The whole tree's PSS, bytes.
    pub fn total_bytes(&self) -> u64 {
        self.main_bytes + self.worker_bytes.iter().sum::<u64>()
    }
}

/// This process's PSS read before a measurement (its warm-up too) and after it, never inside:
/// a read walks the process's page tables and holds its memory map (milliseconds for a large
/// process); one made by a thread while the loader ran doubled the wait of the epochs' first
/// batches on a loaded machine, and one between the warm-up and the measured steps let the
/// workers fill their queue for the first of them.
pub struct PssReads {
    started: std::time::Instant,
    reads: Vec<PssSample>,
}

impl PssReads {
    /// The read before the window.
    pub fn start() -> Self {
        let mut reads = Self { started: std::time::Instant::now(), reads: Vec::new() };
        reads.read();
        reads
    }

    /// A read now.
    fn read(&mut self) {
        if let Some((main_bytes, anonymous_bytes)) = crate::timing::pss_and_anonymous_bytes() {
            let at_s = self.started.elapsed().as_secs_f64();
            let worker_bytes = Vec::new();
            self.reads.push(PssSample { at_s, main_bytes, worker_bytes, anonymous_bytes });
        }
    }

    /// The read after the window, and the figures of both.
    pub fn figures(mut self) -> Option<MemoryFigures> {
        self.read();
        MemoryFigures::of(&self.reads)
    }
}

/// The least growth over the measured steps taken for more than noise, MB: a slope that adds
/// less (or less than [`GROWTH_LEAST_PCT`] of the level) is not flagged whatever its interval.
pub const GROWTH_LEAST_MB: f64 = 16.0;

/// The least growth over the measured steps taken for more than noise, percent of the level.
pub const GROWTH_LEAST_PCT: f64 = 5.0;

/// What a configuration's process tree holds in memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryFigures {
    /// PSS of the whole tree at the steady state (the median of the reads), MB.
    pub pss_mb: f64,
    /// What one worker process holds (the mean of the workers' PSS at the reads), MB; None
    /// where there is none, or the workers are threads (the native loader: its PSS is one).
    pub per_worker_pss_mb: Option<f64>,
    /// The PSS's least-squares slope over the measured steps, MB per minute.
    pub pss_slope_mb_per_min: f64,
    /// Whether it grows beyond noise: the slope's 95 % interval above zero (or, with few reads,
    /// a rise at every read) and its growth over the steps more than [`GROWTH_LEAST_MB`] and
    /// [`GROWTH_LEAST_PCT`] of the level. A leak shows so; a loader warming its caches may too,
    /// over a short run.
    pub growing: bool,
    /// Reads it was made of.
    pub reads: usize,
}

/// Student's t at 97.5 % for `df` degrees of freedom (1 to 10; 2.0 beyond).
fn t_975(df: usize) -> f64 {
    const T: [f64; 10] = [12.71, 4.30, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23];
    T.get(df.wrapping_sub(1)).copied().unwrap_or(2.0)
}

impl MemoryFigures {
    /// The figures of `reads` (in time order); None without one.
    pub fn of(reads: &[PssSample]) -> Option<Self> {
        let mb = |bytes: u64| bytes as f64 / 1e6;
        let mut totals: Vec<f64> = reads.iter().map(|r| mb(r.total_bytes())).collect();
        let first = reads.first()?;
        let workers: Vec<f64> =
            reads.iter().flat_map(|r| r.worker_bytes.iter().map(|&w| mb(w))).collect();
        let per_worker_pss_mb =
            (!workers.is_empty()).then(|| workers.iter().sum::<f64>() / workers.len() as f64);
        let points: Vec<(f64, f64)> = reads.iter().map(|r| (r.at_s, mb(r.total_bytes()))).collect();
        let (slope_per_s, _) = slope(&points).unwrap_or((0.0, false));
        // Whether it grows is asked of the anonymous memory: the PSS rises by the tree's new
        // share of a library's pages when another process mapping it exits.
        let points: Vec<(f64, f64)> = match reads.iter().all(|r| r.anonymous_bytes > 0) {
            true => reads.iter().map(|r| (r.at_s, mb(r.anonymous_bytes))).collect(),
            false => points,
        };
        let (growth_per_s, beyond_noise) = slope(&points).unwrap_or((0.0, false));
        // Few reads give a wide interval, two none: a rise at every read says it too.
        let rising = points.len() >= 2 && points.windows(2).all(|w| w[1].1 > w[0].1);
        totals.sort_by(f64::total_cmp);
        let pss_mb = totals[totals.len() / 2];
        let span_s = reads.last().map_or(0.0, |r| r.at_s) - first.at_s;
        let growth = growth_per_s * span_s;
        let least = GROWTH_LEAST_MB.max(GROWTH_LEAST_PCT / 100.0 * pss_mb);
        Some(Self {
            pss_mb,
            per_worker_pss_mb,
            pss_slope_mb_per_min: slope_per_s * 60.0,
            growing: (beyond_noise || rising) && growth > least,
            reads: reads.len(),
        })
    }

    /// Several processes' figures, read alike (the ranks measured at once) as one tree's: the
    /// levels and slopes summed, a worker's the mean, growing where any is.
    pub fn of_trees(trees: &[MemoryFigures]) -> Option<Self> {
        let workers: Vec<f64> = trees.iter().filter_map(|t| t.per_worker_pss_mb).collect();
        Some(Self {
            pss_mb: trees.iter().map(|t| t.pss_mb).sum(),
            per_worker_pss_mb: (!workers.is_empty())
                .then(|| workers.iter().sum::<f64>() / workers.len() as f64),
            pss_slope_mb_per_min: trees.iter().map(|t| t.pss_slope_mb_per_min).sum(),
            growing: trees.iter().any(|t| t.growing),
            reads: trees.iter().map(|t| t.reads).min()?,
        })
    }
}

/// The least-squares slope of `points` (seconds, MB) per second, and whether its 95 % interval
/// lies above zero (never, of two points); None for fewer than two points or no time between.
fn slope(points: &[(f64, f64)]) -> Option<(f64, bool)> {
    let n = points.len();
    if let [(t0, y0), (t1, y1)] = points {
        return (t1 > t0).then(|| ((y1 - y0) / (t1 - t0), false));
    }
    if n < 3 {
        return None;
    }
    let mean = |f: fn(&(f64, f64)) -> f64| points.iter().map(f).sum::<f64>() / n as f64;
    let (tx, ty) = (mean(|p| p.0), mean(|p| p.1));
    let sxx: f64 = points.iter().map(|p| (p.0 - tx).powi(2)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let b = points.iter().map(|p| (p.0 - tx) * (p.1 - ty)).sum::<f64>() / sxx;
    let residual: f64 = points.iter().map(|p| (p.1 - ty - b * (p.0 - tx)).powi(2)).sum();
    let se = (residual / (n - 2) as f64 / sxx).sqrt();
    Some((b, b - t_975(n - 2) * se > 0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reads(totals_mb: &[f64], workers: usize) -> Vec<PssSample> {
        totals_mb
            .iter()
            .enumerate()
            .map(|(i, &mb)| PssSample {
                at_s: i as f64 * 10.0,
                main_bytes: (mb * 1e6) as u64,
                worker_bytes: vec![50_000_000; workers],
                anonymous_bytes: 0,
            })
            .collect()
    }

    #[test]
    fn growth_is_asked_of_the_anonymous_memory_not_the_pss() {
        // The PSS rises 300 MB (another process sharing a library exited); the anonymous
        // memory stays: not growing. The anonymous memory rising 300 MB is.
        let mut shared = reads(&[900.0, 1200.0], 0);
        shared.iter_mut().for_each(|r| r.anonymous_bytes = 400_000_000);
        let shared = MemoryFigures::of(&shared).unwrap();
        assert!(!shared.growing && shared.pss_slope_mb_per_min > 0.0, "{shared:?}");
        let mut leak = reads(&[900.0, 1200.0], 0);
        leak[1].anonymous_bytes = 700_000_000;
        leak[0].anonymous_bytes = 400_000_000;
        assert!(MemoryFigures::of(&leak).unwrap().growing);
    }

    #[test]
    fn a_steady_tree_is_its_median_and_a_leak_is_flagged_by_its_slope() {
        let steady = MemoryFigures::of(&reads(&[900.0, 905.0, 898.0, 903.0, 901.0, 899.0], 2));
        let steady = steady.unwrap();
        assert_eq!(steady.pss_mb, 1001.0, "the median of main and two workers");
        assert_eq!(steady.per_worker_pss_mb, Some(50.0));
        assert!(!steady.growing && steady.pss_slope_mb_per_min.abs() < 5.0, "{steady:?}");
        // 40 MB a read, 10 s apart: 240 MB a minute, 200 MB over the steps.
        let leak: Vec<f64> = (0..6).map(|i| 900.0 + 40.0 * i as f64).collect();
        let leak = MemoryFigures::of(&reads(&leak, 0)).unwrap();
        assert!(leak.growing && (leak.pss_slope_mb_per_min - 240.0).abs() < 1e-6, "{leak:?}");
        assert_eq!(leak.per_worker_pss_mb, None);
        // A slope within its noise, or too small to matter, is not.
        let noisy = MemoryFigures::of(&reads(&[900.0, 980.0, 890.0, 990.0, 900.0, 1000.0], 0));
        assert!(!noisy.unwrap().growing);
        let small: Vec<f64> = (0..6).map(|i| 900.0 + 2.0 * i as f64).collect();
        assert!(!MemoryFigures::of(&reads(&small, 0)).unwrap().growing, "10 MB in all");
        assert!(MemoryFigures::of(&[]).is_none());
    }

    #[test]
    fn ranks_trees_add_up() {
        let one = MemoryFigures::of(&reads(&[900.0; 3], 1)).unwrap();
        let both = MemoryFigures::of_trees(&[one.clone(), one]).unwrap();
        assert_eq!((both.pss_mb, both.per_worker_pss_mb), (1900.0, Some(50.0)));
    }
}
