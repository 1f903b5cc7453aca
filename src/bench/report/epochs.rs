//! The decoded-frame cache epoch by epoch: per row whose loader had a cache, the first epoch's
//! and the later epochs' samples/s and the share of frames copied; beside it, where the sweep
//! measured LeRobot's loader with the same knobs, that loader's rate (it decodes every epoch).

use super::model::{Report, Row};
use crate::bench::format::rate;
use crate::bench::sweep::cell::Knob;
use crate::loader::knobs::LoaderKnob;

impl Report {
    /// One line per row with a cache; empty where no row had one.
    pub(crate) fn epoch_lines(&self) -> Vec<String> {
        let pairs = self.loaders.as_ref().map_or(&[][..], |c| &c.pairs[..]);
        (self.rows.iter().enumerate())
            .filter_map(|(i, row)| {
                let cache = row.cache.as_ref()?;
                let rate_of = |r: Option<f64>| r.map(rate);
                let first = rate_of(cache.first_epoch_samples_per_s)
                    .map_or("none measured".into(), |r| format!("{r} samples/s"));
                let mut line = format!("{}: epoch 1 {first}", self.label(row));
                match (cache.first_epoch_samples_per_s, cache.later_epochs_samples_per_s) {
                    (Some(one), Some(later)) => line.push_str(&format!(
                        ", later epochs {} ({:.1}×)",
                        rate(later),
                        later / one
                    )),
                    (_, Some(later)) => line.push_str(&format!(", later epochs {}", rate(later))),
                    (_, None) => line.push_str(
                        ", later epochs not reached by the loader phase (more `loader_batches` \
                         measure them)",
                    ),
                }
                line.push_str(&format!(
                    "; {:.0} % of the frames written were copied from the cache",
                    cache.hit_pct
                ));
                let twin = pairs.iter().find(|p| p.native == i).map(|p| &self.rows[p.lerobot]);
                if let Some(rate_alone) = twin.and_then(|t| t.loader_samples_per_s) {
                    line.push_str(&format!(
                        "; LeRobot's loader decodes every epoch: {} samples/s",
                        rate(rate_alone)
                    ));
                }
                Some(line)
            })
            .collect()
    }

    /// A (native) row's knobs as `workers 2, prefetch 2, batch 64, cache 4GiB` and the other
    /// knobs the sweep varied, each named and valued by the sweep's table of knobs.
    fn label(&self, row: &Row) -> String {
        let shown =
            [&LoaderKnob::WORKERS, &LoaderKnob::PREFETCH, &LoaderKnob::BATCH, &LoaderKnob::CACHE]
                .map(Knob::Loader);
        // Only the native loader has a cache: the backend goes without saying.
        let others = (self.varying.iter().copied())
            .filter(|knob| !shown.contains(knob) && *knob != Knob::Backend);
        (shown.into_iter().chain(others))
            .map(|knob| format!("{} {}", knob.name(), knob.value(&row.knobs)))
            .collect::<Vec<_>>()
            .join(", ")
    }
}
