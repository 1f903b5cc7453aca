//! A sweep's loader knobs ([`KnobAxes`]): every knob of the loader's table, a list of values
//! for a knob a cell carries (the table gives it cell facts: one cell per value), one value that
//! every cell shares for the rest.

use crate::bench::sweep::knob_values::{KnobFront, KnobValues};
use crate::loader::knobs::LoaderKnob;

/// What a sweep makes of the loader's table: its `[loader]` section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SweepKnobs;

/// A sweep's loader knobs with their values.
pub type KnobAxes = KnobValues<SweepKnobs>;

impl KnobFront for SweepKnobs {
    const SECTION: &'static str = "loader";
    const OWN_KEYS: &'static [&'static str] =
        &["window", "loader", "python", "video_backend", "lerobot_train"];

    /// Workers 0, 1 and 2 and batches of 16 and 64.
    fn defaults(loader: KnobAxes) -> KnobAxes {
        loader.with(&LoaderKnob::WORKERS, ["0", "1", "2"]).with(&LoaderKnob::BATCH, ["16", "64"])
    }

    /// The knobs a cell carries (the table gives them cell facts).
    fn takes_a_list(knob: &LoaderKnob) -> bool {
        knob.cell.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_are_the_knobs_a_cell_carries_by_the_names_the_report_gives_them() {
        use crate::bench::sweep::knob::{Knob, KnobSet};
        let axes: Vec<&str> =
            LoaderKnob::ALL.iter().filter(|k| SweepKnobs::takes_a_list(k)).map(|k| k.key).collect();
        let own = ["dataset", "model", "device", "dtype", "loader"];
        let cells: Vec<&str> = Knob::set(KnobSet::All)
            .into_iter()
            .map(Knob::name)
            .filter(|n| !own.contains(n))
            .collect();
        assert_eq!(axes, cells);
        assert_eq!(axes[..5], ["workers", "prefetch", "batch", "resolution", "images"]);
    }

    #[test]
    fn the_base_takes_each_knobs_first_value() {
        let axes = KnobAxes::default()
            .with(&LoaderKnob::DROP_N_LAST_FRAMES, ["3"])
            .with(&LoaderKnob::CACHE, ["1GiB", "0"]);
        let base = axes.config();
        assert_eq!((base.workers, base.batch_size), (0, 16));
        assert_eq!((base.drop_n_last_frames, base.cache_bytes), (Some(3), 1 << 30));
        assert_eq!(axes.typed(&LoaderKnob::CACHE, |c| c.cache_bytes), [1 << 30, 0]);
    }
}
