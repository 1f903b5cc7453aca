//! How tune's answer is said: the one paragraph (the answer, its figures, what bounds it and
//! what to try) and the whole answer as printed, the flags to paste and the faster-step table
//! after it. The answer itself is decided in [`super::answer`].

use std::fmt;

use super::answer::{Answer, Bound, PrefetchDepths};
use crate::bench::format::{millis, rate};
use crate::bench::report::beside_the_wait;
use crate::dataset::bytes::Bytes;
use crate::loader::lerobot::{LoaderBackend, Startup};
use crate::timing::stage::Stage;

impl Answer {
    /// The one paragraph: the answer, its figures, and what bounds it.
    pub fn paragraph(&self) -> String {
        let mut text = self.figures_sentences();
        text.push_str(&self.closeness_sentences());
        text.push_str(&self.bound_sentence());
        text.push_str(&self.beside_sentences());
        text
    }

    /// What was measured at the answer and what the step asks for: the configuration and its
    /// train samples/s, the wait, the step's time and demand, one worker's rate.
    fn figures_sentences(&self) -> String {
        let d = &self.demand;
        let mut text = String::new();
        let ranks = self.knobs.processes;
        if ranks > 1 {
            let how = match self.measured_at_once {
                true => format!("measured with the {ranks} ranks at once"),
                false => "predicted from one rank measured alone".into(),
            };
            text.push_str(&format!(
                "Per rank, for {ranks} ranks sharing this box ({} and {:.1} GB each; {how}): ",
                cores(self.budgets.cpus),
                self.budgets.memory_bytes as f64 / 1e9
            ));
        }
        text.push_str(&format!(
            "{} (prefetch {}) with batch {}: {} train samples/s",
            if ranks > 1 { workers(self.workers) } else { capitalised(&workers(self.workers)) },
            self.prefetch,
            self.knobs.config.batch_size,
            rate(self.train_samples_per_s)
        ));
        if let Some((low, high)) = self.train_interval {
            text.push_str(&format!(" (95 % CI {} to {})", rate(low), rate(high)));
        }
        let takes = match d.varies {
            Some(v) => format!(
                "takes {} ms on average (replayed: median {} ms, p95 {} ms)",
                millis(d.step_ms),
                millis(v.median_ms),
                millis(v.p95_ms)
            ),
            None => format!("takes {} ms", millis(d.step_ms)),
        };
        let takes = match d.handover_ms {
            Some(ms) => format!(
                "{takes} as the run takes it ({} ms of it the hand-over of each batch before \
                 the step)",
                millis(ms)
            ),
            None => takes,
        };
        text.push_str(&format!(
            ", {:.1} % of the step waiting for batches and copying them (p95 {:.1} %). The step \
             {takes} and asks for {} samples/s; one worker loads {} samples/s ({} CPU \
             ms/sample",
            self.input_bound_pct.0,
            self.input_bound_pct.1,
            rate(d.samples_per_s()),
            rate(self.rates.per_worker),
            millis(self.cpu_ms_per_sample),
        ));
        if let Some(m) = self.rates.marginal {
            text.push_str(&format!(", a second adds {:.0} % of one", 100.0 * m));
        }
        text.push_str("). ");
        text
    }

    /// One worker fewer, and a configuration too close to call, where there is one.
    fn closeness_sentences(&self) -> String {
        let mut text = String::new();
        if let Some(pct) = self.one_fewer_pct {
            if self.workers > 0 {
                text.push_str(&format!("One worker fewer: {pct:+.1} % train samples/s. "));
            }
        }
        if let Some(t) = &self.too_close {
            let other = format!(
                "{}, prefetch {}: {} samples/s",
                workers(t.workers),
                t.prefetch,
                rate(t.train_samples_per_s)
            );
            text.push_str(&if t.workers > self.workers {
                format!("Perhaps as good as the best measured ({other})")
            } else {
                format!("Fewer might do as well ({other})")
            });
            text.push_str(&format!(
                ": the difference ({:+.1} %, 95 % CI {:+.1} to {:+.1} %) straddles the {:.0} % \
                 target, too close to call; more --train-steps decide. ",
                t.change.percent, t.change.low, t.change.high, self.target_pct
            ));
        }
        text
    }

    /// What bounds the answer, and what would move it.
    fn bound_sentence(&self) -> String {
        let d = &self.demand;
        match &self.bound {
            Bound::Step if self.input_bound_pct.0 > self.target_pct => {
                let rest = match self.knobs.loader {
                    // lerobot-train's main process hands each batch over before its step.
                    LoaderBackend::LerobotTrain | LoaderBackend::FeedbenchLerobotTrain => {
                        "which no worker count or prefetch moves; on CUDA \
                         (--policy.device=cuda) the conversion runs on the device"
                    }
                    _ => "which no worker count or prefetch shortens",
                };
                let rest = format!("{}, {rest}", beside_the_wait(self.knobs.loader));
                format!(
                    "The loader keeps up (the wait is {:.1} % of the step): the rest is {rest}.",
                    self.wait_pct.0
                )
            }
            Bound::Step => format!(
                "The step dominates: more workers would not train faster (within {:.0} %).",
                self.target_pct
            ),
            Bound::Cpus { workers_needed: Some(n) } => format!(
                "Bound by the cores: no configuration within {} keeps the step fed. It needs {} \
                 ({} CPU ms/sample × {} samples/s ≈ {:.1} cores of loading), so about {} cores \
                 with the training process.{}",
                cores(self.budgets.cpus),
                workers(*n),
                millis(self.cpu_ms_per_sample),
                rate(d.samples_per_s()),
                self.cpu_ms_per_sample * d.samples_per_s() / 1e3,
                n + 1,
                self.stage_advice()
            ),
            Bound::Cpus { workers_needed: None } => format!(
                "Bound by the loader: a second worker adds too little for any count to feed this \
                 step within {}.{}",
                cores(self.budgets.cpus),
                self.stage_advice()
            ),
            Bound::Memory { most_workers } => format!(
                "Bound by the memory budget ({:.1} GB): more than {} with these batches would \
                 not fit. A smaller prefetch, --uint8 frames or a lower resolution hold less.",
                self.budgets.memory_bytes as f64 / 1e9,
                workers(*most_workers)
            ),
            Bound::Loader if self.too_close.is_some_and(|t| t.workers > self.workers) => format!(
                "Input-bound at this count: more workers share the {} with the step.{}",
                cores(self.budgets.cpus),
                self.stage_advice()
            ),
            Bound::Loader => format!(
                "Still input-bound, and more workers did not help: they share the {} with the \
                 step.{}",
                cores(self.budgets.cpus),
                self.stage_advice()
            ),
            Bound::Store { remote, advice } => {
                format!("Bound by the store: the stream is {remote} — {advice}.")
            }
        }
    }

    /// What else the answer says where it applies: the frame cache, the prefetch depths, the
    /// step beside the loader, a long start-up, the memory held; each with a leading space.
    fn beside_sentences(&self) -> String {
        let d = &self.demand;
        let ranks = self.knobs.processes;
        let mut text = String::new();
        if let Some(fit) = &self.cache {
            text.push(' ');
            text.push_str(&fit.sentence(d.samples_per_s()));
        }
        if let Some(depths) = &self.prefetch_depths {
            text.push_str(&self.depths_sentence(depths));
        }
        if let Some(beside) = &self.step_beside {
            text.push_str(&beside.sentences(self.train_samples_per_s));
        }
        // A start-up of seconds (spawned workers import torch and LeRobot) is a large share of
        // a short run: said where it passes one second.
        if let Some(first) = self.first_batch_s.filter(|&s| s > 1.0) {
            let steps = 9.0 * first * 1e3 / d.step_ms.max(f64::MIN_POSITIVE);
            text.push_str(&format!(
                " Its DataLoader takes {first:.1} s to its first batch (its workers' start-up): \
                 a run of fewer than {steps:.0} steps spends more than a tenth of its time \
                 starting."
            ));
            if let Some(startup) = &self.startup {
                text.push_str(&startup_sentence(startup));
            }
        }
        if let Some(bytes) = self.memory_bytes {
            let gb = |b: u64| b as f64 / 1e9;
            let ranks = match self.memory_at_ranks_bytes {
                Some(all) if ranks > 1 => format!("; the {ranks} ranks {:.2} GB together", gb(all)),
                _ => String::new(),
            };
            text.push_str(&format!(
                " It holds {:.2} GB of memory (the PSS of the training process and its workers, \
                 measured){ranks}.",
                gb(bytes)
            ));
        }

        text
    }

    /// Which prefetch depth rides out a varying step's spread, against the others measured,
    /// and what the next would hold, as a sentence with a leading space.
    fn depths_sentence(&self, depths: &PrefetchDepths) -> String {
        let others: Vec<String> = depths
            .measured
            .iter()
            .filter(|&&(depth, _)| depth != self.prefetch)
            .map(|&(depth, rate_at)| format!("{} at prefetch {depth}", rate(rate_at)))
            .collect();
        format!(
            " Prefetch {} rides out the step's spread: {} samples/s against {}; prefetch {} would \
             hold {:.2} GB more.",
            self.prefetch,
            rate(self.train_samples_per_s),
            others.join(", "),
            self.prefetch * 2,
            depths.deeper_adds_bytes as f64 / 1e9
        )
    }

    /// What the loader's dominant stage points to, as a sentence with a leading space.
    fn stage_advice(&self) -> String {
        let Some((name, pct)) = &self.dominant_stage else {
            return String::new();
        };
        let to = match name.as_str() {
            n if n == Stage::Decode.name() => {
                "a layout that decodes cheaper (smaller frames, another codec or GOP: \
                 `feedbench layout` measures candidates on these frames)"
            }
            n if n == Stage::Convert.name() => {
                "videos stored at the resolution the policy trains at, or --uint8 frames \
                 (normalised on the device)"
            }
            _ => "the stage itself (see `feedbench load` for the timing tree)",
        };
        format!(" The loader spends {pct:.0} % of its CPU in {name}: {to}.")
    }
}

/// `n workers`, `1 worker`.
fn workers(n: usize) -> String {
    format!("{n} worker{}", if n == 1 { "" } else { "s" })
}

/// `n cores`, `1 core`.
fn cores(n: usize) -> String {
    format!("{n} core{}", if n == 1 { "" } else { "s" })
}

fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |c| c.to_uppercase().collect::<String>() + chars.as_str())
}

/// What a slow start is made of, where the driver took it apart: the workers' own start, and
/// the dataset each is sent pickled (its largest part named), with the warning where there is
/// one.
fn startup_sentence(startup: &Startup) -> String {
    let ready = startup.workers.iter().filter_map(|w| w.started_s).fold(0.0, f64::max);
    let sent = match (&startup.pickled_bytes, &startup.largest_part) {
        (Some(bytes), Some(part)) => format!(
            ", each sent {} of the dataset pickled (its largest part `{}`, {})",
            Bytes::of(*bytes),
            part.name,
            Bytes::of(part.bytes)
        ),
        (Some(bytes), None) => format!(", each sent {} of the dataset pickled", Bytes::of(*bytes)),
        (None, _) => String::new(),
    };
    let warning = startup.warning.as_ref().map(|w| format!(" Note: {w}.")).unwrap_or_default();
    format!(" Its {} workers were ready after {ready:.1} s{sent}.{warning}", startup.start_method)
}

impl fmt::Display for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.paragraph())?;
        writeln!(f)?;
        let whose = match self.knobs.loader {
            LoaderBackend::Native => "feedbench",
            LoaderBackend::FeedbenchLerobotTrain => "feedbench-lerobot-train",
            LoaderBackend::Lerobot | LoaderBackend::LerobotTrain => "lerobot-train",
        };
        writeln!(f, "Flags ({whose}): {}", self.flags())?;
        if let Some(from) = &self.knobs.processes_from {
            writeln!(f, "Ranks: {} ({from}).", self.knobs.processes)?;
        }
        writeln!(f)?;
        writeln!(f, "A faster step (same loader, {:.0} % target):", self.target_pct)?;
        writeln!(
            f,
            "  {:>8}  {:>9}  {:>10}  {:>7}  {:>5}",
            "speed", "step ms", "samples/s", "workers", "cores"
        )?;
        for b in &self.beyond {
            let (w, c) = match b.workers {
                Some(w) => (w.to_string(), (w + 1).to_string()),
                None => ("-".into(), "-".into()),
            };
            writeln!(
                f,
                "  {:>7}×  {:>9}  {:>10}  {w:>7}  {c:>5}",
                b.speedup,
                millis(b.step_ms),
                rate(b.demand_samples_per_s)
            )?;
        }
        writeln!(
            f,
            "  (cores: the workers and the training process, at one worker's measured rate)"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loader::lerobot::{LargestPart, WorkerStart};

    #[test]
    fn a_slow_start_names_what_each_worker_was_sent() {
        let worker = |worker, started_s| WorkerStart { worker, started_s, first_batch_s: None };
        let startup = Startup {
            start_method: "spawn".into(),
            pickled_bytes: Some(268_460_000),
            largest_part: Some(LargestPart { name: "ballast".into(), bytes: 268_440_000 }),
            workers: vec![worker(0, Some(4.47)), worker(1, Some(8.5))],
            warning: None,
        };
        let said = startup_sentence(&startup);
        assert!(said.contains("Its spawn workers were ready after 8.5 s"), "{said}");
        assert!(said.contains("each sent 268.5 MB of the dataset pickled"), "{said}");
        assert!(said.contains("its largest part `ballast`, 268.4 MB"), "{said}");
        let forked = Startup { start_method: "fork".into(), pickled_bytes: None, ..startup };
        assert_eq!(startup_sentence(&forked), " Its fork workers were ready after 8.5 s.");
    }
}
