//! The batches of a `train` phase on their way to the trainer. For a CUDA step they pass a stage
//! of their own, as a DataLoader's pin-memory thread (lerobot-train sets `pin_memory=True` for
//! a CUDA device): a thread takes each batch from the loader's stream, copies its tensors into
//! page-locked memory and from there to the device on a side stream
//! ([`SideStreamCopier`]) while the trainer steps on the one before, so that the step waits
//! only for what of the copy is left. Where the process has no side stream to give, the
//! thread pins and the step copies. With no workers there is no such thread in PyTorch either:
//! the batch is pinned where it is made, in the trainer's wait.

use std::sync::mpsc::{sync_channel, Receiver};
use std::thread::{Scope, ScopedJoinHandle};

use super::figures::TrainError;
use crate::loader::batch::Batch;
use crate::loader::pipeline::{Batches, LoadedBatch};
use crate::model::side_stream::SideStreamCopier;
use crate::model::{ModelError, StagedBatch};
use crate::timing::{stage, TimingTree, TraceTrack};

/// A batch and what was readied of it ahead of the step.
type Readied<P> = Result<(LoadedBatch, P), TrainError>;

/// Batches readied by `ready` on a thread of their own, one ahead of the trainer, in the
/// stream's order.
pub(super) struct Ahead<'s, P> {
    readied: Option<Receiver<Readied<P>>>,
    thread: ScopedJoinHandle<'s, TimingTree>,
}

impl<'s, P: Send + 's> Ahead<'s, P> {
    /// Starts the thread on `stream`. Once it has readied the first `warmup` batches it drops
    /// the timing so far, as the trainer does at the end of its warm-up; `ready`'s time is the
    /// tree's [`stage::PIN`] (a span on `track` each).
    pub(super) fn start<'e>(
        scope: &'s Scope<'s, 'e>,
        mut stream: Batches,
        warmup: usize,
        track: Option<TraceTrack>,
        mut ready: impl FnMut(&Batch) -> Result<P, ModelError> + Send + 's,
    ) -> Self {
        let (hand, readied) = sync_channel(0);
        let thread = scope.spawn(move || {
            let mut timing = TimingTree::traced(track.clone());
            let mut taken = 0;
            // The loader's stream runs epoch after epoch; it ends only after an error.
            while let Some(batch) = stream.next() {
                taken += 1;
                let batch = batch.map_err(TrainError::from).and_then(|batch| {
                    let readied = timing.time(stage::PIN, || ready(&batch))?;
                    Ok((batch, readied))
                });
                if taken == warmup {
                    timing = TimingTree::traced(track.clone());
                    stream.take_timing();
                }
                // The trainer stopped taking batches (its steps done, or an error).
                if hand.send(batch).is_err() {
                    break;
                }
            }
            timing.merge(&stream.take_timing());
            timing
        });
        Self { readied: Some(readied), thread }
    }

    /// The next batch and what was readied of it, waiting for it where it is not ready yet.
    pub(super) fn next(&self) -> Readied<P> {
        let readied = self.readied.as_ref().expect("taken only by finish, which consumes self");
        readied.recv().unwrap_or_else(|_| {
            Err(ModelError::Device("the thread that stages batches stopped".into()).into())
        })
    }

    /// Stops the thread (it finishes the batch in hand) and gives its timing: the loader's
    /// since the warm-up, and the readying.
    pub(super) fn finish(mut self) -> TimingTree {
        drop(self.readied.take());
        self.thread.join().unwrap_or_default()
    }
}

/// Where the trainer takes its batches from: the loader's stream, or the staging thread.
pub(super) enum Feeder<'s> {
    /// Straight from the loader's stream; batches for `pin` (a CUDA device) pinned in the
    /// trainer's wait, as PyTorch does without workers.
    Loader {
        /// The loader's batches.
        stream: Batches,
        /// The device batches are pinned for, if any.
        pin: Option<tch::Device>,
    },
    /// Through the staging thread.
    Staged(Ahead<'s, StagedBatch>),
}

impl<'s> Feeder<'s> {
    /// The feeder for a step on `device` with `workers` loader workers — the staging thread
    /// for a CUDA device with workers — and how its batches reach a CUDA device, in words.
    pub(super) fn start<'e>(
        scope: &'s Scope<'s, 'e>,
        stream: Batches,
        device: tch::Device,
        workers: usize,
        warmup: usize,
        track: Option<TraceTrack>,
    ) -> (Self, Option<String>) {
        if !device.is_cuda() {
            return (Feeder::Loader { stream, pin: None }, None);
        }
        if workers == 0 {
            let how = "pinned in the trainer's wait (no workers), copied to the device by the step";
            return (Feeder::Loader { stream, pin: Some(device) }, Some(how.into()));
        }
        let (how, ahead) = match SideStreamCopier::new(device) {
            Ok(mut copier) => (
                "pinned and copied to the device on a side stream, ahead of the step".into(),
                Ahead::start(scope, stream, warmup, track, move |b| {
                    copier.copy(b).map(StagedBatch::OnDevice)
                }),
            ),
            Err(why) => (
                format!(
                    "pinned ahead of the step, copied to the device by it (no side stream: {why})"
                ),
                Ahead::start(scope, stream, warmup, track, move |b| StagedBatch::pin(b, device)),
            ),
        };
        (Feeder::Staged(ahead), Some(how))
    }

    /// The next batch, and its tensors staged where the step is on CUDA.
    pub(super) fn next(&mut self) -> Readied<Option<StagedBatch>> {
        match self {
            Feeder::Loader { stream, pin } => {
                let batch = stream.next().expect("epoch after epoch: the stream does not end")?;
                let pinned = pin.map(|device| StagedBatch::pin(&batch, device)).transpose()?;
                Ok((batch, pinned))
            }
            Feeder::Staged(ahead) => ahead.next().map(|(batch, staged)| (batch, Some(staged))),
        }
    }

    /// The trainer's warm-up ended: the loader's timing so far is dropped (the staging thread
    /// drops its own when it has readied the warm-up's batches).
    pub(super) fn warmed_up(&mut self) {
        if let Feeder::Loader { stream, .. } = self {
            stream.take_timing();
        }
    }

    /// Stops the feeding and gives the timing since the warm-up.
    pub(super) fn finish(self) -> TimingTree {
        match self {
            Feeder::Loader { mut stream, .. } => stream.take_timing(),
            Feeder::Staged(ahead) => ahead.finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::dataset::write::{write_tabular, TabularSpec};
    use crate::dataset::{Dataset, WindowSpec};
    use crate::loader::batch::BatchData;
    use crate::loader::config::LoaderConfig;
    use crate::loader::pipeline::Loader;

    fn indices(batch: &Batch) -> Vec<i64> {
        let BatchData::I64(index) = &batch.tensors["index"].data else { panic!("index is int64") };
        index.clone()
    }

    /// A loader of 4 batches an epoch over a generated table, with 2 workers.
    fn loader(dir: &std::path::Path) -> Loader {
        let root = dir.join("ds");
        let spec = TabularSpec { episode_lengths: vec![20, 12], ..Default::default() };
        write_tabular(&root, &spec).unwrap();
        let dataset = Dataset::open(&root).unwrap();
        let window = dataset.window(&WindowSpec::diffusion()).unwrap();
        let config = LoaderConfig { workers: 2, batch_size: 5, ..LoaderConfig::default() };
        Loader::new(Arc::new(dataset), window, config).unwrap()
    }

    #[test]
    fn each_batch_comes_in_the_streams_order_with_what_was_readied_of_it() {
        let dir = tempfile::tempdir().unwrap();
        let loader = loader(dir.path());
        let per_epoch = loader.epochs(0).per_epoch();
        let want: Vec<Vec<i64>> =
            loader.epochs(0).take(3 * per_epoch).map(|b| indices(&b.unwrap())).collect();
        std::thread::scope(|scope| {
            let ahead = Ahead::start(scope, loader.epochs(0), 1, None, |b| Ok(indices(b)));
            for want in &want {
                let (batch, readied) = ahead.next().unwrap();
                assert_eq!((&indices(&batch), &readied), (want, want));
            }
            ahead.finish();
        });
    }

    #[test]
    fn a_batch_that_could_not_be_readied_is_an_error_in_its_place_and_stopping_ends_the_thread() {
        let dir = tempfile::tempdir().unwrap();
        let loader = loader(dir.path());
        std::thread::scope(|scope| {
            let mut readied = 0;
            let ready = move |_: &Batch| {
                readied += 1;
                match readied {
                    3 => Err(ModelError::Device("no page-locked memory".into())),
                    _ => Ok(readied),
                }
            };
            let ahead = Ahead::start(scope, loader.epochs(0), 0, None, ready);
            assert_eq!(ahead.next().unwrap().1, 1);
            assert_eq!(ahead.next().unwrap().1, 2);
            let Err(err) = ahead.next() else { panic!("the third could not be readied") };
            assert!(err.to_string().contains("no page-locked memory"), "{err}");
            assert_eq!(ahead.next().unwrap().1, 4, "the stream goes on");
            // The thread readies the fifth and stops when it cannot hand it on.
            assert_eq!(ahead.finish().get(stage::PIN).map(|t| t.calls), Some(5));
        });
    }

    #[test]
    fn a_cuda_step_without_a_side_stream_has_its_batches_pinned_ahead_and_is_told_why() {
        if tch::Cuda::is_available() {
            eprintln!("a GPU is here: the fallback without a side stream is not tested");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let loader = loader(dir.path());
        let cuda = tch::Device::Cuda(0);
        std::thread::scope(|scope| {
            let (mut feeder, staging) = Feeder::start(scope, loader.epochs(0), cuda, 2, 0, None);
            let staging = staging.expect("a CUDA step's batches are staged");
            assert!(staging.starts_with("pinned ahead of the step, copied to the device by it (no side stream: device: cudaSetDevice: CUDA error")
                || staging.contains("no side stream: device: this libtorch loaded no CUDA runtime"), "{staging}");
            assert!(matches!(feeder, Feeder::Staged(_)), "a thread of its own, with workers");
            // Pinning needs a driver too: the batch comes as an error, not a crash.
            let Err(err) = feeder.next() else { panic!("pinned without a GPU") };
            assert!(err.to_string().contains("libtorch"), "{err}");
            feeder.finish();
            let (feeder, staging) = Feeder::start(scope, loader.epochs(0), cuda, 0, 0, None);
            assert!(staging.unwrap().starts_with("pinned in the trainer's wait (no workers)"));
            assert!(matches!(feeder, Feeder::Loader { pin: Some(_), .. }));
            let (feeder, staging) =
                Feeder::start(scope, loader.epochs(0), tch::Device::Cpu, 2, 0, None);
            assert!(staging.is_none() && matches!(feeder, Feeder::Loader { pin: None, .. }));
        });
    }

    #[test]
    fn the_timing_of_the_warm_ups_batches_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let loader = loader(dir.path());
        std::thread::scope(|scope| {
            let ahead = Ahead::start(scope, loader.epochs(0), 2, None, |_| Ok(()));
            for _ in 0..5 {
                ahead.next().unwrap();
            }
            // Readied: 2 in the warm-up, 3 after it, and the sixth that found no taker.
            let timing = ahead.finish();
            assert_eq!(timing.get(stage::PIN).map(|t| t.calls), Some(4));
            assert!(timing.get(stage::BATCH).is_some(), "the loader's timing is in it");
        });
    }
}
