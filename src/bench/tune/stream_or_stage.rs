//! Stream or stage: on a URL root, tune's answer measured a second time, from a copy staged to
//! fast storage (`/dev/shm` unless told), so that the answer says with figures whether staging
//! pays — how long the copy takes and how many bytes it holds, the samples/s from it against
//! streaming, the epochs after which it has paid for itself — and the bytes each node reads an
//! epoch either way (every node of a multi-node run copies the whole dataset to stage; streaming,
//! it reads its share of the epoch).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::request::{rows_of, StageTo, TuneError, TuneRequest};
use crate::bench::events::Events;
use crate::bench::format::rate;
use crate::bench::sweep::cell::Cell;
use crate::bench::sweep::config::EpisodeChoice;
use crate::bench::sweep::results::CellResult;
use crate::bench::sweep::{run_cell, CellPhases, SweepContext, SweepError};
use crate::dataset::bytes::Bytes;
use crate::dataset::stage::{
    check_destination, is_staged, plan_stage, scratch_dir, stage, staging_of,
};
use crate::measure::phase::{ModelPhase, RemoteBound};

/// The copy a tune staged and what it gave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StagedFigures {
    /// Where it was copied.
    pub to: PathBuf,
    /// Whether the copy is kept there.
    pub kept: bool,
    /// Wall seconds the copy took; None where it was found whole (a `--stage-to` directory
    /// staged before), not timed.
    pub seconds: Option<f64>,
    /// Bytes copied (the files an epoch reads, and the metadata).
    pub bytes: u64,
    /// Files an earlier, stopped stage into the same directory had copied whole: the seconds
    /// do not count them.
    #[serde(default)]
    pub files_kept: usize,
    /// Train samples/s from the copy at the answer's configuration.
    pub samples_per_s: f64,
}

/// Tune's answer to "stream, or stage first?" for a URL root.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamOrStage {
    /// The root streamed.
    pub root: String,
    /// The answer's workers.
    pub workers: usize,
    /// Requests in flight per reader.
    pub requests_in_flight: usize,
    /// Train samples/s streaming, at the answer's configuration.
    pub stream_samples_per_s: f64,
    /// Bytes fetched from the store per sample streaming, where measured.
    pub stream_bytes_per_sample: Option<f64>,
    /// What held the stream, where measured.
    pub stream_bound: Option<RemoteBound>,
    /// Samples of an epoch.
    pub epoch_samples: usize,
    /// Nodes of the run, each with its ranks.
    pub nodes: usize,
    /// The staged copy, where it was measured.
    pub staged: Option<StagedFigures>,
    /// Why staging was not measured, where it was not.
    pub not_staged: Option<String>,
    /// The tolerance within which two rates count as the same, percent.
    pub target_pct: f64,
}

impl StreamOrStage {
    /// Seconds an epoch takes streaming.
    pub fn stream_epoch_s(&self) -> f64 {
        self.epoch_samples as f64 / self.stream_samples_per_s.max(1e-9)
    }

    /// Bytes each node fetches from the store in an epoch streaming (its share of the epoch's
    /// samples), where measured.
    pub fn stream_bytes_per_node(&self) -> Option<f64> {
        self.stream_bytes_per_sample
            .map(|b| b * self.epoch_samples as f64 / self.nodes.max(1) as f64)
    }

    /// Whether training from the copy is faster than streaming, beyond the tolerance.
    pub fn staging_faster(&self) -> bool {
        self.staged.as_ref().is_some_and(|s| {
            s.samples_per_s > self.stream_samples_per_s * (1.0 + self.target_pct / 100.0)
        })
    }

    /// Epochs after which staging has paid for its copy (the copy's time over the time an epoch
    /// saves), where training from the copy is faster.
    pub fn payback_epochs(&self) -> Option<f64> {
        let staged = self.staged.as_ref().filter(|_| self.staging_faster())?;
        let staged_epoch_s = self.epoch_samples as f64 / staged.samples_per_s;
        Some(staged.seconds? / (self.stream_epoch_s() - staged_epoch_s))
    }

    /// The answer in words.
    pub fn paragraph(&self) -> String {
        let bound = self.stream_bound.map_or(String::new(), |b| format!(", {b}"));
        let fetched = self.stream_bytes_per_sample.map_or(String::new(), |per_sample| {
            format!(
                ", {} fetched an epoch ({} a sample)",
                Bytes::new(per_sample * self.epoch_samples as f64),
                Bytes::new(per_sample)
            )
        });
        let mut text = format!(
            "Stream or stage. Streaming {} at {} worker{} × {} requests in flight: {} samples/s{bound}; \
             an epoch of {} samples in {:.0} s{fetched}.",
            self.root,
            self.workers,
            if self.workers == 1 { "" } else { "s" },
            self.requests_in_flight,
            rate(self.stream_samples_per_s),
            self.epoch_samples,
            self.stream_epoch_s()
        );
        let Some(staged) = &self.staged else {
            let why = self.not_staged.as_deref().unwrap_or("not asked");
            text.push_str(&format!(" Staging was not measured: {why}."));
            return text;
        };
        let kept = if staged.files_kept > 0 {
            format!(" ({} files a stopped stage had copied not counted)", staged.files_kept)
        } else {
            String::new()
        };
        let copied = match staged.seconds {
            Some(seconds) => format!("copied in {seconds:.1} s{kept}"),
            None => "found whole there (its copy not timed)".into(),
        };
        text.push_str(&format!(
            " Staging to {}: {} {copied}, then {} samples/s from the copy ({:.0} s an epoch)",
            staged.to.display(),
            Bytes::of(staged.bytes),
            rate(staged.samples_per_s),
            self.epoch_samples as f64 / staged.samples_per_s.max(1e-9)
        ));
        let command = match staged.kept {
            true => format!("train from {}", staged.to.display()),
            false => format!("`feedbench stage {} DIR`, then train from DIR", self.root),
        };
        text.push_str(&match self.payback_epochs() {
            Some(epochs) if epochs < 1.0 => format!(
                ": staging pays back within the first epoch ({epochs:.2} of one) — stage: \
                 {command}."
            ),
            Some(epochs) => format!(
                ": staging pays back after {epochs:.1} epochs — for a longer run stage \
                 ({command}); for a shorter one stream."
            ),
            None if self.staging_faster() => format!(
                ": the copy trains faster; stage it ({command}) for a run of more than one epoch."
            ),
            None => format!(
                ": staging does not pay — the copy trains no faster than streaming (within {:.0} \
                 %); stream.",
                self.target_pct
            ),
        });
        if self.nodes > 1 {
            if let Some(per_node) = self.stream_bytes_per_node() {
                text.push_str(&format!(
                    " Over {} nodes, each node's ranks stream {} an epoch, where staging copies {} \
                     to every node.",
                    self.nodes,
                    Bytes::new(per_node),
                    Bytes::of(staged.bytes)
                ));
            }
        }
        text
    }
}

/// What measuring from a staged copy needs of the tune.
pub(super) struct FromTheTune<'a> {
    /// The tune's request.
    pub request: &'a TuneRequest<'a>,
    /// The cell of the answer's configuration, as measured streaming.
    pub cell: Cell,
    /// Its last measurement streaming.
    pub streamed: &'a CellResult,
    /// The phases the tune measures a configuration with.
    pub phases: CellPhases<'a>,
    /// Samples of an epoch.
    pub epoch_samples: usize,
}

/// Streaming against staging for the tune of a URL root: the answer's configuration measured
/// from a copy staged as `request.stage` says. Staging that cannot be done (no room, a store
/// that fails) is said in the answer, not an error of the tune.
pub(super) fn measure_staged(
    from: FromTheTune<'_>,
    models: &mut HashMap<String, ModelPhase>,
    events: &mut dyn Events,
) -> Result<StreamOrStage, TuneError> {
    let request = from.request;
    let streamed_rows = rows_of(std::slice::from_ref(from.streamed));
    let stream_samples_per_s = streamed_rows.first().map_or(0.0, |r| r.train_samples_per_s);
    let remote = from.streamed.train.remote.as_ref();
    let mut answer = StreamOrStage {
        root: request.root.display().to_string(),
        workers: from.cell.knobs.workers,
        requests_in_flight: from
            .cell
            .loader_config(&request.config.loader.knobs.config())
            .requests_in_flight,
        stream_samples_per_s,
        stream_bytes_per_sample: remote.map(|r| r.bytes_per_sample),
        stream_bound: remote.map(|r| r.bound),
        epoch_samples: from.epoch_samples,
        nodes: request.nodes,
        staged: None,
        not_staged: None,
        target_pct: request.settings.target_pct,
    };
    let (to, keep) = match &request.stage {
        StageTo::Not => {
            answer.not_staged = Some("--no-stage".into());
            return Ok(answer);
        }
        StageTo::Into(dir) => (dir.clone(), true),
        StageTo::Scratch => {
            let name = crate::bench::sweep::dataset_name(request.root);
            (scratch_dir().join(format!("tune-stage-{name}")), false)
        }
    };
    match staged_and_measured(&from, &to, keep, models, events) {
        Ok(staged) => answer.staged = Some(staged),
        Err(Unstaged::Said(why)) => answer.not_staged = Some(why),
        Err(Unstaged::Failed(e)) => return Err(e),
    }
    Ok(answer)
}

/// Why a copy was not measured: a reason the answer says, or a failure of the tune's.
enum Unstaged {
    Said(String),
    Failed(TuneError),
}

/// Stages the tune's root into `to` (a directory of the tune's own made afresh unless `keep`)
/// and measures the answer's configuration from the copy; the copy removed after unless `keep`.
fn staged_and_measured(
    from: &FromTheTune<'_>,
    to: &Path,
    keep: bool,
    models: &mut HashMap<String, ModelPhase>,
    events: &mut dyn Events,
) -> Result<StagedFigures, Unstaged> {
    let request = from.request;
    let said = |e: &dyn std::fmt::Display| Unstaged::Said(e.to_string());
    let episodes = match &request.config.dataset.episodes {
        Some(EpisodeChoice::List(list)) => Some(list.indices().to_vec()),
        _ => None,
    };
    let plan = plan_stage(request.root, episodes.as_deref()).map_err(|e| said(&e))?;
    let scratch = Scratch { to, keep };
    if !keep {
        scratch.remove();
    }
    if !to.exists() {
        check_destination(to, &plan).map_err(|e| said(&e))?;
    }
    events.said(&format!(
        "staging {} to {} to measure the answer from a local copy",
        Bytes::of(plan.bytes),
        to.display()
    ));
    let start = Instant::now();
    let staged = match is_staged(request.root, to, &plan) {
        true => None,
        false => Some(stage(request.root, to, &plan).map_err(|e| said(&e))?),
    };
    let seconds = start.elapsed().as_secs_f64();
    let config = request.config;
    let failed = |e: SweepError| Unstaged::Failed(e.into());
    let out = request.out.join("staged");
    let (context, _) = SweepContext::open(config, to, &out, config.model.device(), request.bridge)
        .map_err(failed)?;
    events.said(&format!(
        "measuring {} × prefetch {} from the copy",
        from.cell.knobs.workers, from.cell.knobs.prefetch
    ));
    let result = run_cell(&context, &from.cell, from.phases, models, |_| {}).map_err(failed)?;
    let samples_per_s = rows_of(&[result]).first().map_or(0.0, |r| r.train_samples_per_s);
    Ok(StagedFigures {
        to: to.to_path_buf(),
        kept: keep,
        seconds: staged.as_ref().map(|_| seconds),
        bytes: plan.bytes,
        files_kept: staged.map_or(0, |s| s.kept),
        samples_per_s,
    })
}

/// A tune's own staging directory, removed when measured (and where an earlier tune left one).
struct Scratch<'a> {
    to: &'a Path,
    keep: bool,
}

impl Scratch<'_> {
    /// Removes the copy and what a stopped stage left beside it.
    fn remove(&self) {
        let _ = std::fs::remove_dir_all(self.to);
        if let Some(staging) = staging_of(self.to) {
            let _ = std::fs::remove_dir_all(staging);
        }
    }
}

impl Drop for Scratch<'_> {
    fn drop(&mut self) {
        if !self.keep {
            self.remove();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(stream: f64, staged: Option<(f64, Option<f64>)>) -> StreamOrStage {
        StreamOrStage {
            root: "s3://bucket/g1".into(),
            workers: 4,
            requests_in_flight: 8,
            stream_samples_per_s: stream,
            stream_bytes_per_sample: Some(50_000.0),
            stream_bound: Some(RemoteBound::Link),
            epoch_samples: 10_000,
            nodes: 4,
            staged: staged.map(|(samples_per_s, seconds)| StagedFigures {
                to: "/dev/shm/feedbench/tune-stage-g1".into(),
                kept: false,
                seconds,
                bytes: 400_000_000,
                files_kept: 0,
                samples_per_s,
            }),
            not_staged: staged.is_none().then(|| "--no-stage".into()),
            target_pct: 5.0,
        }
    }

    #[test]
    fn staging_pays_back_after_its_copy_over_the_time_an_epoch_saves() {
        // 100 s an epoch streaming, 50 s from the copy: a 25 s copy pays back in half an epoch.
        let fast = answer(100.0, Some((200.0, Some(25.0))));
        assert_eq!(fast.payback_epochs(), Some(0.5));
        assert!(fast.paragraph().contains("within the first epoch"), "{}", fast.paragraph());
        // A 150 s copy takes three epochs to pay back.
        let slow = answer(100.0, Some((200.0, Some(150.0))));
        assert_eq!(slow.payback_epochs(), Some(3.0));
        assert!(slow.paragraph().contains("after 3.0 epochs"), "{}", slow.paragraph());
    }

    #[test]
    fn a_copy_no_faster_than_the_stream_within_the_target_never_pays() {
        let same = answer(100.0, Some((104.0, Some(1.0))));
        assert_eq!(same.payback_epochs(), None);
        assert!(same.paragraph().contains("staging does not pay"), "{}", same.paragraph());
        let untimed = answer(100.0, Some((200.0, None)));
        assert_eq!(untimed.payback_epochs(), None);
        assert!(untimed.paragraph().contains("not timed"), "{}", untimed.paragraph());
        assert!(untimed.paragraph().contains("the copy trains faster"), "{}", untimed.paragraph());
    }

    #[test]
    fn each_node_streams_its_share_of_the_epoch_and_copies_the_whole_to_stage() {
        let a = answer(100.0, Some((200.0, Some(25.0))));
        // 10 000 samples × 50 kB over 4 nodes.
        assert_eq!(a.stream_bytes_per_node(), Some(125_000_000.0));
        let text = a.paragraph();
        assert!(text.contains("stream 125.0 MB an epoch, where staging copies 400.0 MB"), "{text}");
        let unstaged = answer(100.0, None).paragraph();
        assert!(unstaged.contains("Staging was not measured: --no-stage."), "{unstaged}");
    }
}
