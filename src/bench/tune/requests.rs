//! Requests in flight on a URL root: where the answer's stream waits on the store's first bytes
//! (latency-bound), its configuration is measured again with twice the range requests in flight
//! per reader, and twice again while each doubling gains beyond the target; where it still
//! waits, with twice the workers — a worker waiting on the store holds no core, so more than
//! the cores can help — up to four per core and within the memory budget. The answer takes the
//! best. Coalescing is kept, its read amplification said beside it.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::answer::{Answer, Bound};
use super::request::{rows_of, TuneError};
use super::search::Budgets;
use crate::bench::events::Events;
use crate::bench::format::rate;
use crate::bench::sweep::cell::Cell;
use crate::bench::sweep::results::CellResult;
use crate::bench::sweep::{run_cell, CellPhases, SweepContext};
use crate::dataset::bytes::Bytes;
use crate::measure::phase::{ModelPhase, RemoteBound};

/// The most range requests a reader keeps in flight (the knob's bound).
const MOST_REQUESTS: usize = 64;

/// The most workers per core measured for a stream that waits on its store.
const MOST_WORKERS_PER_CORE: usize = 4;

/// Tune's answer for the requests in flight of a URL root.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestsAnswer {
    /// Each count measured at the answer's workers and prefetch, first the one searched at,
    /// with its train samples/s.
    pub measured: Vec<(usize, f64)>,
    /// The count the answer takes.
    pub chosen: usize,
    /// What held the stream at the chosen count, where measured.
    pub bound: Option<RemoteBound>,
    /// Bytes fetched over the bytes needed at the chosen count, where measured.
    pub read_amplification: Option<f64>,
    /// The coalescing gap kept, bytes.
    pub coalesce_bytes: u64,
    /// The tolerance a doubling had to gain by, percent.
    pub target_pct: f64,
    /// Worker counts measured beyond the answer's where the stream still waited on first bytes
    /// at the chosen count, each with its train samples/s; empty where none were.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workers_measured: Vec<(usize, f64)>,
    /// The workers the answer takes (the search's, or more from `workers_measured`).
    #[serde(default)]
    pub workers_chosen: usize,
}

impl RequestsAnswer {
    /// The answer in words.
    pub fn sentence(&self) -> String {
        let (first, first_rate) = self.measured[0];
        let bound = self.bound.map_or(String::new(), |b| format!(" ({b})"));
        let amplification = self
            .read_amplification
            .map_or(String::new(), |a| format!(" at read amplification {a:.2}"));
        let coalesce = format!(
            "Ranges {} apart or nearer are fetched as one{amplification}.",
            Bytes::of(self.coalesce_bytes)
        );
        if self.measured.len() == 1 {
            return format!(
                "Requests in flight: {first} per reader, kept — the stream is not waiting on the \
                 store's first bytes{bound}, so more in flight would not help. {coalesce}"
            );
        }
        let tried: Vec<String> =
            self.measured.iter().map(|&(n, r)| format!("{n}: {}", rate(r))).collect();
        let chosen_rate =
            self.measured.iter().find(|&&(n, _)| n == self.chosen).map_or(first_rate, |m| m.1);
        let verdict = if self.chosen == first {
            format!("{first} kept: more gained less than {:.0} %", self.target_pct)
        } else {
            format!(
                "{} taken: {:+.0} % over {first}",
                self.chosen,
                (chosen_rate / first_rate - 1.0) * 100.0
            )
        };
        format!(
            "Requests in flight: the stream waited on the store's first bytes, so more in flight \
             were measured (samples/s at each count — {}); {verdict}{bound}. {coalesce}{}",
            tried.join(", "),
            self.workers_sentence()
        )
    }

    /// What more workers did, where they were measured.
    fn workers_sentence(&self) -> String {
        let (Some(&(first, first_rate)), Some(chosen)) = (
            self.workers_measured.first(),
            self.workers_measured.iter().find(|&&(n, _)| n == self.workers_chosen),
        ) else {
            return String::new();
        };
        let tried: Vec<String> =
            self.workers_measured.iter().map(|&(n, r)| format!("{n}: {}", rate(r))).collect();
        let verdict = match chosen.0 == first {
            true => format!("{first} kept: more gained less than {:.0} %", self.target_pct),
            false => format!(
                "{} taken: {:+.0} % over {first} (the answer above is theirs)",
                chosen.0,
                (chosen.1 / first_rate - 1.0) * 100.0
            ),
        };
        format!(
            " It still waited at {} in flight: a worker waiting on the store holds no core, so \
             more workers than the cores were measured (samples/s at each count — {}); {verdict}.",
            self.chosen,
            tried.join(", ")
        )
    }
}

/// What measuring more requests in flight needs of the tune.
pub(super) struct AtTheAnswer<'a> {
    /// The tune's open dataset and config.
    pub context: &'a SweepContext<'a>,
    /// The answer's configuration, as measured.
    pub cell: Cell,
    /// Its last measurement.
    pub measured: CellResult,
    /// The phases a configuration is measured with.
    pub phases: CellPhases<'a>,
    /// The tolerance a doubling must gain by, percent.
    pub target_pct: f64,
    /// The budgets the answer kept to: its cores bound the workers measured (four per core),
    /// its memory the workers taken.
    pub budgets: Budgets,
}

/// The requests in flight the answer takes on a URL root (None where its stream made no
/// requests: a local root), and the measurement of the configuration it chose.
pub(super) fn searched_requests(
    at: AtTheAnswer<'_>,
    models: &mut HashMap<String, ModelPhase>,
    events: &mut dyn Events,
) -> Result<(Option<RequestsAnswer>, CellResult), TuneError> {
    let Some(remote) = at.measured.train.remote.clone() else {
        return Ok((None, at.measured));
    };
    let rate_of = |result: &CellResult| {
        rows_of(std::slice::from_ref(result)).first().map_or(0.0, |r| r.train_samples_per_s)
    };
    let start = at.cell.knobs.requests_in_flight;
    let mut measured = vec![(start, rate_of(&at.measured))];
    let (mut best, mut best_rate, mut bound) = (at.measured, measured[0].1, remote.bound);
    let mut amplification = remote.read_amplification;
    let mut count = start;
    while bound == RemoteBound::Latency && count < MOST_REQUESTS {
        count = (count * 2).min(MOST_REQUESTS);
        let mut cell = at.cell.clone();
        cell.knobs.requests_in_flight = count;
        events.said(&format!(
            "tune: the stream waits on the store's first bytes: measuring {} × prefetch {} with \
             {count} requests in flight",
            cell.knobs.workers, cell.knobs.prefetch
        ));
        let result = run_cell(at.context, &cell, at.phases, models, |_| {})?;
        let samples_per_s = rate_of(&result);
        measured.push((count, samples_per_s));
        if samples_per_s <= best_rate * (1.0 + at.target_pct / 100.0) {
            break;
        }
        let remote = result.train.remote.as_ref();
        bound = remote.map_or(RemoteBound::Decode, |r| r.bound);
        amplification = remote.and_then(|r| r.read_amplification);
        (best, best_rate) = (result, samples_per_s);
    }
    // Still waiting on first bytes: more workers, each waiting apart.
    let mut workers_measured = Vec::new();
    let most_workers = at.budgets.cpus.max(1) * MOST_WORKERS_PER_CORE;
    if bound == RemoteBound::Latency {
        workers_measured.push((best.cell.knobs.workers, best_rate));
    }
    while bound == RemoteBound::Latency && best.cell.knobs.workers < most_workers {
        let mut cell = best.cell.clone();
        // Twice the readers: 0 workers is one, the consuming thread.
        cell.knobs.workers = (cell.knobs.workers.max(1) * 2).min(most_workers);
        events.said(&format!(
            "tune: the stream still waits on the store's first bytes: measuring {} × prefetch {} \
             with {} requests in flight",
            cell.knobs.workers, cell.knobs.prefetch, cell.knobs.requests_in_flight
        ));
        let result = run_cell(at.context, &cell, at.phases, models, |_| {})?;
        let samples_per_s = rate_of(&result);
        workers_measured.push((cell.knobs.workers, samples_per_s));
        let held = result.train.memory.as_ref().map_or(0, |m| (m.pss_mb * 1e6) as u64);
        if samples_per_s <= best_rate * (1.0 + at.target_pct / 100.0)
            || held > at.budgets.memory_bytes
        {
            break;
        }
        let remote = result.train.remote.as_ref();
        bound = remote.map_or(RemoteBound::Decode, |r| r.bound);
        amplification = remote.and_then(|r| r.read_amplification);
        (best, best_rate) = (result, samples_per_s);
    }
    let answer = RequestsAnswer {
        measured,
        chosen: best.cell.knobs.requests_in_flight,
        bound: best.train.remote.as_ref().map(|r| r.bound),
        read_amplification: amplification,
        coalesce_bytes: at.cell.knobs.coalesce_bytes,
        target_pct: at.target_pct,
        workers_measured,
        workers_chosen: best.cell.knobs.workers,
    };
    Ok((Some(answer), best))
}

/// `answer` made the configuration `measured` with more workers than the search's (a stream
/// that waited on its store): its workers and figures; the search's comparisons of fewer
/// workers no longer apply, and where it feeds the step within `target_pct`, the step bounds it.
pub(super) fn remote_workers_into(answer: &mut Answer, measured: &CellResult, target_pct: f64) {
    let wait_pct = answer.take_measured(measured.cell.knobs.workers, &measured.train);
    (answer.one_fewer_pct, answer.too_close) = (None, None);
    if wait_pct <= target_pct {
        answer.bound = Bound::Step;
    }
}

/// Where the answer, `streamed`, still waits for its batches and its stream waits on the store
/// (its first bytes or its link), the store bounds it, not the cores: said with the change
/// that helps.
pub(super) fn store_bound_into(answer: &mut Answer, streamed: &CellResult, target_pct: f64) {
    let Some(remote) = &streamed.train.remote else { return };
    if answer.wait_pct.0 > target_pct && remote.bound != RemoteBound::Decode {
        answer.bound = Bound::Store { remote: remote.bound, advice: remote.advice() };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(measured: Vec<(usize, f64)>, chosen: usize) -> RequestsAnswer {
        RequestsAnswer {
            measured,
            chosen,
            bound: Some(RemoteBound::Decode),
            read_amplification: Some(1.02),
            coalesce_bytes: 32 * 1024,
            target_pct: 5.0,
            workers_measured: Vec::new(),
            workers_chosen: 2,
        }
    }

    #[test]
    fn the_sentence_says_what_was_measured_and_what_was_taken() {
        let kept = answer(vec![(8, 300.0)], 8).sentence();
        assert!(kept.contains("8 per reader, kept"), "{kept}");
        assert!(kept.contains("32.8 kB apart or nearer"), "{kept}");
        let taken = answer(vec![(1, 100.0), (2, 180.0), (4, 185.0)], 2).sentence();
        assert!(taken.contains("1: 100, 2: 180, 4: 185"), "{taken}");
        assert!(taken.contains("2 taken: +80 % over 1"), "{taken}");
        let none = answer(vec![(8, 300.0), (16, 301.0)], 8).sentence();
        assert!(none.contains("8 kept: more gained less than 5 %"), "{none}");
        assert!(!none.contains("more workers"), "no workers measured, none said: {none}");
        let workers = RequestsAnswer {
            workers_measured: vec![(2, 200.0), (4, 262.0), (8, 265.0)],
            workers_chosen: 4,
            ..answer(vec![(8, 200.0), (16, 201.0)], 8)
        }
        .sentence();
        assert!(workers.contains("It still waited at 8 in flight"), "{workers}");
        assert!(workers.contains("2: 200, 4: 262, 8: 265); 4 taken: +31 % over 2"), "{workers}");
    }
}
