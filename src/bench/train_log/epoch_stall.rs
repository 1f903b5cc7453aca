//! The stall at epoch starts: `data_s` spikes an epoch apart, as a DataLoader that drains at
//! each epoch's end and starts its workers again makes them.

use std::fmt;

use serde::Serialize;

use super::read::{LoggedStep, TrainLog};
use crate::measure::stats::Stats;

impl TrainLog {
    /// The steps between two logged lines (the median spacing, at least 1): the log's
    /// `--log_freq`.
    fn logged_interval(&self) -> usize {
        let mut spacing: Vec<f64> =
            self.steps.windows(2).map(|w| (w[1].step - w[0].step).max(1.0)).collect();
        spacing.sort_by(f64::total_cmp);
        spacing.get(spacing.len() / 2).map_or(1.0, |s| s.round().max(1.0)) as usize
    }

    /// The steps of an epoch as the log's `epch:` says it (its first and last dated lines),
    /// where it says one.
    fn epoch_steps(&self) -> Option<f64> {
        let dated: Vec<&LoggedStep> = self.steps.iter().filter(|s| s.epoch.is_some()).collect();
        match (dated.first(), dated.last()) {
            (Some(a), Some(b)) if b.epoch > a.epoch && b.step > a.step => {
                Some((b.step - a.step) / (b.epoch.unwrap_or(0.0) - a.epoch.unwrap_or(0.0)))
            }
            _ => None,
        }
    }

    /// The stall at epoch starts, where the log shows one: a spacing (the epoch's length, at
    /// most what the log's `epch:` says, since lerobot-train counts an epoch by the dataset's
    /// frames and the sampler drops some) and a phase at which every logged interval, twice or
    /// more (three times without `epch:`), waited at least twice the median data_s and at
    /// least [`STALL_LEAST_S`] more. The log's first interval (the workers' start) is left out,
    /// and at most [`STALL_EPOCHS`] epochs are read.
    pub fn epoch_stall(&self) -> Option<EpochStall> {
        let kept = self.steps.get(1..).filter(|k| k.len() >= 4)?;
        let steady_data_s = Stats::of_ms(kept.iter().map(|s| s.data_s)).median_ms;
        let (window, epoch_steps) = (self.logged_interval(), self.epoch_steps());
        let first = kept[0].step as usize;
        let span =
            epoch_steps.map_or(5000 * window, |e| ((STALL_EPOCHS as f64 * e) as usize).max(window));
        let kept: Vec<&LoggedStep> =
            kept.iter().take_while(|s| (s.step as usize) < first + span).collect();
        let last = kept.last()?.step as usize;
        // The logged interval that holds step `t`: the first logged at `t` or after, within
        // the interval's steps.
        let holding = |t: usize| {
            let at = kept.partition_point(|s| (s.step as usize) < t);
            kept.get(at).filter(|s| (s.step as usize) < t + window)
        };
        let needed = if epoch_steps.is_some() { 2 } else { 3 };
        // A period longer than the kept steps' span over `needed - 1` holds fewer spikes than
        // needed: none is tried (an `epch:` that barely rises over many steps made it huge).
        let longest = (last - first) / (needed - 1);
        let (least, most) = match epoch_steps {
            Some(e) => (((0.5 * e) as usize).max(2 * window), (1.05 * e) as usize + window),
            None => (2 * window, (last - first) / 2),
        };
        let most = most.min(longest);
        if least > most {
            return None;
        }
        // Each period tries every phase and each phase the spikes a period apart: about as
        // many looks as logged intervals per period. Past SEARCH_LOOKS in all, the periods are
        // tried a stride apart, so the search stays linear in the log's length.
        let looks_per_period = (last - first) / window + 1;
        let periods = (most - least) / window + 1;
        let stride = window * (periods * looks_per_period / SEARCH_LOOKS).max(1);
        let mut best: Option<(f64, usize, usize, Vec<&LoggedStep>)> = None;
        for period in (least..=most).step_by(stride) {
            for phase in (0..period).step_by(window) {
                let mut held = Vec::new();
                let mut t = first + phase;
                while t <= last {
                    match holding(t) {
                        Some(s) => held.push(*s),
                        None => break,
                    }
                    t += period;
                }
                if held.len() < needed || t <= last {
                    continue;
                }
                let lowest = held.iter().map(|s| s.data_s).fold(f64::MAX, f64::min);
                if best.as_ref().is_none_or(|(b, ..)| lowest > *b) {
                    best = Some((lowest, period, phase, held));
                }
            }
        }
        let (lowest, period, phase, spikes) = best?;
        let excess = |data_s: f64| (data_s - steady_data_s).max(0.0) * window as f64;
        let spike = |data_s: f64| data_s >= 2.0 * steady_data_s && excess(data_s) >= STALL_LEAST_S;
        // Spikes half a period on as well recur more often than an epoch: not its start.
        let halfway = (first + phase + period / 2..=last)
            .step_by(period)
            .map(|t| holding(t).map_or(0.0, |s| s.data_s))
            .fold(f64::MAX, f64::min);
        if !spike(lowest) || spike(halfway) {
            return None;
        }
        let extra: f64 = spikes.iter().map(|s| excess(s.data_s)).sum();
        let total_s: f64 = kept.iter().map(|s| (s.data_s + s.update_s) * window as f64).sum();
        Some(EpochStall {
            stalls: spikes.len(),
            start_data_s: spikes.iter().map(|s| s.data_s).sum::<f64>() / spikes.len() as f64,
            steady_data_s,
            period_steps: period as f64,
            epoch_steps,
            per_epoch_s: extra / spikes.len() as f64,
            lost_pct: if total_s > 0.0 { 100.0 * extra / total_s } else { 0.0 },
            stall_steps: spikes.iter().map(|s| s.step).collect(),
        })
    }
}

/// The most epochs of a log [`TrainLog::epoch_stall`] reads.
pub const STALL_EPOCHS: usize = 50;

/// The most looks (a logged interval asked for at a step) the stall's search makes before it
/// tries its periods further apart.
const SEARCH_LOOKS: usize = 20_000_000;

/// The least extra wait a stall must cost, seconds.
pub const STALL_LEAST_S: f64 = 0.005;

/// The wait a DataLoader that drains at each epoch's end costs the run, as its log shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EpochStall {
    /// Logged intervals that stalled.
    pub stalls: usize,
    /// Their mean data_s, seconds.
    pub start_data_s: f64,
    /// The median data_s of the logged intervals, seconds.
    pub steady_data_s: f64,
    /// Steps from one stall to the next.
    pub period_steps: f64,
    /// Steps an epoch takes by the log's `epch:` (the dataset's frames over the batch).
    pub epoch_steps: Option<f64>,
    /// The extra wait an epoch start costs, seconds.
    pub per_epoch_s: f64,
    /// The share of the logged time those waits took, percent.
    pub lost_pct: f64,
    /// The logged steps that stalled: where the epochs started.
    pub stall_steps: Vec<f64>,
}

impl fmt::Display for EpochStall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let epoch = self
            .epoch_steps
            .map_or(String::new(), |e| format!(" (an epoch is at most {e:.0} steps by epch:)"));
        write!(
            f,
            "Epoch starts stall: data_s is {:.1} ms at {} logged steps, every {:.0} steps{epoch}, \
             against a median of {:.1} ms: about {:.0} ms more each epoch ({:.1} % of the logged \
             time). PyTorch's DataLoader drains at each epoch's end and lerobot-train asks it \
             for a new iterator, whose workers start the next epoch with an empty queue. \
             feedbench-lerobot-train (the same arguments) takes the epochs back to back, with \
             the same batches in the same order, and removes it.",
            self.start_data_s * 1e3,
            self.stalls,
            self.period_steps,
            self.steady_data_s * 1e3,
            self.per_epoch_s * 1e3,
            self.lost_pct
        )
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn data_s_spikes_an_epoch_apart_are_named_and_others_are_not() {
        // 60 frames, batch 4: 15 steps an epoch by epch; the sampler's epoch is 12 batches.
        let line = |step: usize, data_s: f64| {
            let epch = step as f64 * 4.0 / 60.0;
            format!(
                "step:{step} smpl:{} ep:0 epch:{epch:.2} updt_s:0.100 data_s:{data_s:.3}",
                step * 4
            )
        };
        let log = |spike: &dyn Fn(usize) -> bool| {
            let text: Vec<String> =
                (1..=40).map(|s| line(s, if spike(s) { 0.080 } else { 0.004 })).collect();
            TrainLog::parse(Path::new("l"), &text.join("\n")).unwrap()
        };
        let stall = log(&|s| s % 12 == 1).epoch_stall().expect("every 12 steps: a stall");
        assert_eq!((stall.stalls, stall.period_steps), (3, 12.0), "{stall:?}");
        assert!((stall.per_epoch_s - 0.076).abs() < 1e-9 && stall.epoch_steps == Some(15.0));
        assert!(stall.to_string().contains("every 12 steps (an epoch is at most 15"), "{stall}");
        let summary = log(&|s| s % 12 == 1).summary();
        assert!(summary.to_string().contains("feedbench-lerobot-train"), "{summary}");
        // None without spikes; spikes too close for an epoch, or at no one spacing: none.
        assert_eq!(log(&|_| false).epoch_stall(), None);
        assert_eq!(log(&|s| s % 4 == 1).epoch_stall(), None, "every 4 steps is no epoch");
        assert_eq!(log(&|s| [7, 14, 33].contains(&s)).epoch_stall(), None, "irregular");
    }
}
