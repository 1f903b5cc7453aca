//! What a tune answers ([`Tuned`]): the answer, each measurement that led to it, what it cost,
//! and on a URL root or with several ranks what it measured beside.

use serde::{Deserialize, Serialize};

use super::answer::Answer;
use super::at_once::AtOnce;
use super::request::TuneStep;
use super::requests::RequestsAnswer;
use super::stream_or_stage::StreamOrStage;
use crate::bench::sweep::results::CellResult;
use crate::measure::system::SystemInfo;
use crate::measure::workload::Workload;

/// What a tune did and found.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Tuned {
    /// The answer.
    pub answer: Answer,
    /// The search's steps, in order.
    pub steps: Vec<TuneStep>,
    /// Wall seconds of the measurements made by this run.
    pub measuring_s: f64,
    /// Wall seconds of the whole tune, from its start to its answer.
    pub tune_wall_s: f64,
    /// The budget of wall time it was given, seconds, where it was given one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_s: Option<f64>,
    /// Whether the budget ran out before the search decided: the answer is the best measured
    /// so far.
    #[serde(default)]
    pub budget_ran_out: bool,
    /// lerobot-train runs (LeRobot's parser, dataset, policy) built for the tune, where it
    /// tuned one: once for the whole tune, whatever it measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs_built: Option<usize>,
    /// Wall seconds of `tune_wall_s` spent building them (CUDA's start and the policy on the
    /// device included), where it tuned a run: the rest is the search from the run's first
    /// measured step on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_build_s: Option<f64>,
    /// The answer measured with every rank at once, where the run has several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_once: Option<AtOnce>,
    /// Whether every measurement ran all its batches and steps (`--full-length`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub full_length: bool,
    /// On a URL root: the requests in flight searched where the stream waited on them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<RequestsAnswer>,
    /// On a URL root: streaming against staging a copy first, measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_or_stage: Option<StreamOrStage>,
    /// The work the tune was asked to tune ([`tune_workload`]); absent from tunes written
    /// before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<Workload>,
    /// The host and software it measured on (its measurements'); absent from tunes written
    /// before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<SystemInfo>,
}

/// What a tune measured ([`Workload`]), from its measurements' own: what every one of them
/// shares — the dataset, the knobs not tuned, the step, the batch — without what the search
/// varies (workers, prefetch, requests in flight, how many batches and steps each measured).
pub fn tune_workload(results: &[CellResult]) -> Option<Workload> {
    const VARIED: [&str; 6] = [
        "workers",
        "prefetch",
        "requests_in_flight",
        "loader.batches",
        "train.steps",
        "train.warmup",
    ];
    let mut parameters = results.first()?.workload.as_ref()?.parameters.clone();
    parameters.retain(|name, _| !VARIED.contains(&name.as_str()));
    parameters.insert("measured".into(), "tune: workers and prefetch searched".into());
    Some(Workload::of(parameters))
}
