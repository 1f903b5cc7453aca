//! The loader's knobs, each one unit: its key, its flag and help, its text form (parsed and
//! checked, and written back), its default, which loaders it acts in and what `tune` does with
//! it. [`LoaderKnob::ALL`] is the one table; the command line's flags, the refusals that name a
//! knob, LeRobot's native-only check and tune's refused flags all read it rather than list the
//! knobs again. The values live in [`LoaderConfig`], the one struct that holds them.

use super::batch::ImageFormat;
use super::config::LoaderConfig;
use super::sampler::SamplerKind;
use super::size::CacheSize;
use crate::dataset::setting::{Refusal, Setting};
use crate::dataset::Resolution;

mod facts;
pub use facts::*;

/// The most decoder threads a worker may ask for: FFmpeg's own limit for frame threading.
const MAX_DECODER_THREADS: usize = 16;

/// One knob of the loader.
#[derive(Clone, Copy)]
pub struct LoaderKnob {
    /// Its key in configs (`decoder_threads`), and the name refusals give it there.
    pub key: &'static str,
    /// Its long flag without the dashes (`decoder-threads`).
    pub flag: &'static str,
    /// Whether the flag takes a value or is a switch.
    pub form: FlagForm,
    /// Its help line; a front end adds the default (from [`LoaderConfig::default`], unless the
    /// text says it) and the loader it is for (its reach).
    pub help: &'static str,
    /// Which loaders it acts in.
    pub reach: Reach,
    /// What tune does with it.
    pub tune: TuneRole,
    /// How configs write its values.
    pub toml: TomlType,
    /// Added after configs and results were first kept: left out of them at its default, so
    /// that what was kept before reads and compares the same.
    pub omit_at_default: bool,
    /// What a sweep's cells and report make of it, where a cell carries it (one cell per
    /// value); None: every cell of a sweep shares one value.
    pub cell: Option<CellFacts>,
    get: fn(&LoaderConfig) -> String,
    set: fn(&mut LoaderConfig, &str) -> Result<(), String>,
}

impl std::fmt::Debug for LoaderKnob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("LoaderKnob").field(&self.key).finish()
    }
}

impl PartialEq for LoaderKnob {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl Eq for LoaderKnob {}

impl std::hash::Hash for LoaderKnob {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.key.hash(state);
    }
}

/// A count read from text: `at_least` or more.
fn count(text: &str, at_least: usize) -> Result<usize, String> {
    let n: usize = text.trim().parse().map_err(|_| format!("{text:?}: expected a whole number"))?;
    if n < at_least {
        return Err(format!("{n}: expected at least {at_least}"));
    }
    Ok(n)
}

/// A value read by its type's one text form.
fn parsed<T: std::str::FromStr>(text: &str) -> Result<T, String>
where
    T::Err: std::fmt::Display,
{
    text.trim().parse().map_err(|e: T::Err| e.to_string())
}

/// A switch's value: `true` or `false`.
fn boolean(text: &str) -> Result<bool, String> {
    match text.trim() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(format!("{text:?}: expected true or false")),
    }
}

impl LoaderKnob {
    /// Every knob, in the order `--help` lists them and configs write them.
    pub const ALL: &'static [LoaderKnob] = &[
        Self::WORKERS,
        Self::PREFETCH,
        Self::BATCH,
        Self::RESOLUTION,
        Self::IMAGES,
        Self::DECODER_THREADS,
        Self::CACHE,
        Self::SAMPLER,
        Self::SEED,
        Self::DROP_LAST,
        Self::DROP_N_LAST_FRAMES,
        Self::UNORDERED,
        Self::PIN_MEMORY,
        Self::PERSISTENT_WORKERS,
    ];

    /// Worker threads.
    pub const WORKERS: LoaderKnob = LoaderKnob {
        key: "workers",
        flag: "workers",
        form: FlagForm::Value("N"),
        help: "Worker threads (0: load in the consuming thread) [default: 4, LeRobot's]",
        reach: Reach::Both,
        tune: TuneRole::Searched,
        toml: TomlType::Integer,
        omit_at_default: false,
        cell: Some(CellFacts {
            field: "workers",
            id_prefix: "w",
            role: CellRole::Varied,
            model_phase: false,
            stored: Stored::Number,
        }),
        get: |c| c.workers.to_string(),
        set: |c, t| {
            c.workers = count(t, 0)?;
            Ok(())
        },
    };

    /// Batches in flight per worker.
    pub const PREFETCH: LoaderKnob = LoaderKnob {
        key: "prefetch",
        flag: "prefetch",
        form: FlagForm::Value("N"),
        help: "Batches in flight per worker, at least 1 [default: 2, DataLoader's]",
        reach: Reach::Both,
        tune: TuneRole::Searched,
        toml: TomlType::Integer,
        omit_at_default: false,
        cell: Some(CellFacts {
            field: "prefetch",
            id_prefix: "p",
            role: CellRole::Varied,
            model_phase: false,
            stored: Stored::Number,
        }),
        get: |c| c.prefetch.to_string(),
        set: |c, t| {
            c.prefetch = count(t, 1)?;
            Ok(())
        },
    };

    /// Samples per batch.
    pub const BATCH: LoaderKnob = LoaderKnob {
        key: "batch",
        flag: "batch",
        form: FlagForm::Value("N"),
        help: "Samples per batch, at least 1",
        reach: Reach::Both,
        tune: TuneRole::Fixed,
        toml: TomlType::Integer,
        omit_at_default: false,
        cell: Some(CellFacts {
            field: "batch_size",
            id_prefix: "b",
            role: CellRole::Line,
            model_phase: true,
            stored: Stored::Number,
        }),
        get: |c| c.batch_size.to_string(),
        set: |c, t| {
            c.batch_size = count(t, 1)?;
            Ok(())
        },
    };

    /// Threads inside each worker's video decoder.
    pub const DECODER_THREADS: LoaderKnob = LoaderKnob {
        key: "decoder_threads",
        flag: "decoder-threads",
        form: FlagForm::Value("N"),
        help: "Threads inside each worker's video decoder (libdav1d's or libavcodec's own), 1 \
               to 16: fewer workers for the same decode rate, with fewer batches in flight",
        reach: Reach::Native(
            "LeRobot's video backend keeps its own threading, which feedbench does not set",
        ),
        tune: TuneRole::Fixed,
        toml: TomlType::Integer,
        omit_at_default: true,
        cell: Some(CellFacts {
            field: "decoder_threads",
            id_prefix: "t",
            role: CellRole::Shared,
            model_phase: false,
            stored: Stored::Number,
        }),
        get: |c| c.decoder_threads.to_string(),
        set: |c, t| {
            let most = MAX_DECODER_THREADS;
            let threads: usize =
                t.trim().parse().map_err(|_| format!("{t:?}: expected 1 to {most}"))?;
            if !(1..=most).contains(&threads) {
                return Err(format!("{threads} is not 1 to {most}"));
            }
            c.decoder_threads = threads;
            Ok(())
        },
    };

    /// The decoded-frame cache's budget.
    pub const CACHE: LoaderKnob = LoaderKnob {
        key: "cache",
        flag: "cache",
        form: FlagForm::Value("SIZE"),
        help: "Keep up to this many bytes of decoded frames (e.g. 4GiB), shared by the \
               workers, so that the epochs after the first copy them instead of decoding \
               them again [default: none]",
        reach: Reach::Native(
            "LeRobot's loader keeps no decoded frames; every epoch decodes them again",
        ),
        tune: TuneRole::Fixed,
        toml: TomlType::Text,
        omit_at_default: true,
        cell: Some(CellFacts {
            field: "cache_bytes",
            id_prefix: "c",
            role: CellRole::Shared,
            model_phase: false,
            stored: Stored::Bytes,
        }),
        get: |c| CacheSize(c.cache_bytes).to_string(),
        set: |c, t| {
            c.cache_bytes = parsed::<CacheSize>(t)?.0;
            Ok(())
        },
    };

    /// The size camera frames are decoded at.
    pub const RESOLUTION: LoaderKnob = LoaderKnob {
        key: "resolution",
        flag: "resolution",
        form: FlagForm::Value("HxW"),
        help: "Resize camera frames to HxW (bilinear), e.g. 96x96, or `native`",
        reach: Reach::Native("LeRobot's loader has no resizing; frames come at their stored size"),
        tune: TuneRole::Fixed,
        toml: TomlType::Text,
        omit_at_default: false,
        cell: Some(CellFacts {
            field: "resolution",
            id_prefix: "",
            role: CellRole::Shared,
            model_phase: true,
            stored: Stored::Text,
        }),
        get: |c| c.resolution.to_string(),
        set: |c, t| {
            c.resolution = parsed::<Resolution>(t)?;
            Ok(())
        },
    };

    /// Camera frames as float32 or uint8.
    pub const IMAGES: LoaderKnob = LoaderKnob {
        key: "images",
        flag: "uint8",
        form: FlagForm::Switch("u8"),
        help: "Camera frames as uint8 instead of float32 in [0, 1]",
        reach: Reach::Both,
        tune: TuneRole::Fixed,
        toml: TomlType::Text,
        omit_at_default: false,
        cell: Some(CellFacts {
            field: "images",
            id_prefix: "",
            role: CellRole::Shared,
            model_phase: true,
            stored: Stored::Text,
        }),
        get: |c| c.images.to_string(),
        set: |c, t| {
            c.images = parsed::<ImageFormat>(t)?;
            Ok(())
        },
    };

    /// Dropping the last incomplete batch.
    pub const DROP_LAST: LoaderKnob = LoaderKnob {
        key: "drop_last",
        flag: "drop-last",
        form: FlagForm::Switch("true"),
        help: "Drop the last incomplete batch of an epoch",
        reach: Reach::Both,
        tune: TuneRole::NotTuned,
        toml: TomlType::Boolean,
        omit_at_default: true,
        cell: None,
        get: |c| c.drop_last.to_string(),
        set: |c, t| {
            c.drop_last = boolean(t)?;
            Ok(())
        },
    };

    /// The order of indices.
    pub const SAMPLER: LoaderKnob = LoaderKnob {
        key: "sampler",
        flag: "sampler",
        form: FlagForm::Value("ORDER"),
        help: "Index order: `sequential`, `shuffled` (seeded, anew each epoch) or \
               `episode-aware` (LeRobot's: no sample starts in an episode's last \
               drop_n_last_frames frames)",
        reach: Reach::Both,
        tune: TuneRole::Fixed,
        toml: TomlType::Text,
        omit_at_default: false,
        cell: None,
        get: |c| c.sampler.to_string(),
        set: |c, t| {
            c.sampler = parsed::<SamplerKind>(t)?;
            Ok(())
        },
    };

    /// The frames the episode-aware sampler drops at each episode's end.
    pub const DROP_N_LAST_FRAMES: LoaderKnob = LoaderKnob {
        key: "drop_n_last_frames",
        flag: "drop-n-last-frames",
        form: FlagForm::Value("N"),
        help: "Frames at the end of each episode that the episode-aware sampler never starts \
               a sample at, as LeRobot's EpisodeAwareSampler (lerobot-train takes the \
               policy's: diffusion's horizon − n_action_steps − n_obs_steps + 1), or `window` \
               [default: window: the window's, 7 for `diffusion`, 0 for `none`]",
        reach: Reach::Both,
        tune: TuneRole::Fixed,
        toml: TomlType::Integer,
        omit_at_default: true,
        cell: None,
        get: |c| c.drop_n_last_frames.map_or("window".into(), |n| n.to_string()),
        set: |c, t| {
            c.drop_n_last_frames = match t.trim() {
                "window" => None,
                n => Some(
                    n.parse()
                        .map_err(|_| format!("{t:?}: expected a number of frames, or `window`"))?,
                ),
            };
            Ok(())
        },
    };

    /// The seed of the shuffled orders.
    pub const SEED: LoaderKnob = LoaderKnob {
        key: "seed",
        flag: "seed",
        form: FlagForm::Value("N"),
        help: "Seed of the shuffled orders",
        reach: Reach::Both,
        tune: TuneRole::Fixed,
        toml: TomlType::Integer,
        omit_at_default: false,
        cell: None,
        get: |c| c.seed.to_string(),
        set: |c, t| {
            c.seed =
                t.trim().parse().map_err(|_| format!("{t:?}: expected a seed, a whole number"))?;
            Ok(())
        },
    };

    /// Batches as soon as ready rather than in sampler order.
    pub const UNORDERED: LoaderKnob = LoaderKnob {
        key: "unordered",
        flag: "unordered",
        form: FlagForm::Switch("true"),
        help: "Deliver batches as soon as ready instead of in sampler order",
        reach: Reach::Native("DataLoader delivers batches in order"),
        tune: TuneRole::NotTuned,
        toml: TomlType::Boolean,
        omit_at_default: true,
        cell: None,
        get: |c| (!c.ordered).to_string(),
        set: |c, t| {
            c.ordered = !boolean(t)?;
            Ok(())
        },
    };

    /// `pin_memory=True`: batches in page-locked memory.
    pub const PIN_MEMORY: LoaderKnob = LoaderKnob {
        key: "pin_memory",
        flag: "pin-memory",
        form: FlagForm::Switch("true"),
        help: "`pin_memory=True` (lerobot-train sets it on CUDA)",
        reach: Reach::Lerobot("feedbench's loader keeps its batches in its own pool"),
        tune: TuneRole::NotTuned,
        toml: TomlType::Boolean,
        omit_at_default: true,
        cell: None,
        get: |c| c.pin_memory.to_string(),
        set: |c, t| {
            c.pin_memory = boolean(t)?;
            Ok(())
        },
    };

    /// `persistent_workers`: workers kept across epochs.
    pub const PERSISTENT_WORKERS: LoaderKnob = LoaderKnob {
        key: "persistent_workers",
        flag: "no-persistent-workers",
        form: FlagForm::Switch("false"),
        help: "`persistent_workers=False` (workers started again every epoch; lerobot-train \
               keeps them)",
        reach: Reach::Lerobot("feedbench's workers live as long as the loader"),
        tune: TuneRole::NotTuned,
        toml: TomlType::Boolean,
        omit_at_default: true,
        cell: None,
        get: |c| c.persistent_workers.to_string(),
        set: |c, t| {
            c.persistent_workers = boolean(t)?;
            Ok(())
        },
    };

    /// The knobs a sweep's cell carries (those with [`CellFacts`]), in the table's order.
    pub fn carried() -> impl Iterator<Item = (&'static Self, &'static CellFacts)> {
        Self::ALL.iter().filter_map(|k| k.cell.as_ref().map(|facts| (k, facts)))
    }

    /// The knob whose config key is `key`.
    pub fn by_key(key: &str) -> Option<&'static LoaderKnob> {
        Self::ALL.iter().find(|k| k.key == key)
    }

    /// The setting a refusal names it by.
    pub fn setting(&self) -> Setting {
        Setting::Knob(self.key)
    }

    /// Its value in `config`, in its text form (the one [`Self::set`] reads).
    pub fn get(&self, config: &LoaderConfig) -> String {
        (self.get)(config)
    }

    /// Sets it in `config` from its text form, checked; the error says what was expected and
    /// leaves the naming of the knob to the front end.
    pub fn set(&self, config: &mut LoaderConfig, text: &str) -> Result<(), String> {
        (self.set)(config, text)
    }

    /// Its default, in its text form.
    pub fn default_text(&self) -> String {
        self.get(&LoaderConfig::default())
    }

    /// Whether `config` holds another value than the default.
    pub fn is_set(&self, config: &LoaderConfig) -> bool {
        self.get(config) != self.default_text()
    }

    /// Checks every knob of `config` as if read from its text form: the first its own check
    /// refuses, named (`--batch 0: expected at least 1`, `loader.batch 0: …`).
    pub fn check_all(config: &LoaderConfig) -> Result<(), Refusal> {
        for knob in Self::ALL {
            if let Err(what) = knob.set(&mut config.clone(), &knob.get(config)) {
                let setting = knob.setting();
                return Err(Refusal::new(move |name| format!("{} {what}", name(setting))));
            }
        }
        Ok(())
    }

    /// The knobs `config` sets that `loader` lacks (the table's reach), each with why.
    pub fn lacking(
        config: &LoaderConfig,
        loader: LoaderBackend,
    ) -> impl Iterator<Item = (&'static Self, &'static str)> + '_ {
        Self::ALL.iter().filter_map(move |k| match (k.reach, loader) {
            (
                Reach::Native(why),
                LoaderBackend::Lerobot
                | LoaderBackend::LerobotTrain
                | LoaderBackend::FeedbenchLerobotTrain,
            )
            | (Reach::Lerobot(why), LoaderBackend::Native)
                if k.is_set(config) =>
            {
                Some((k, why))
            }
            _ => None,
        })
    }

    /// Sets every knob `config` sets that `loader` lacks back to its default.
    pub fn reset_lacking(config: &mut LoaderConfig, loader: LoaderBackend) {
        let lacking: Vec<_> = Self::lacking(config, loader).map(|(knob, _)| knob).collect();
        for knob in lacking {
            knob.set(config, &knob.default_text()).expect("a default reads back");
        }
    }

    /// Refuses the first knob `config` sets that `loader` lacks, named, with why.
    pub fn refuse_lacking(config: &LoaderConfig, loader: LoaderBackend) -> Result<(), Refusal> {
        let Some((knob, why)) = Self::lacking(config, loader).next() else { return Ok(()) };
        let whose = match loader {
            LoaderBackend::Native => "a knob of LeRobot's loader",
            LoaderBackend::Lerobot
            | LoaderBackend::LerobotTrain
            | LoaderBackend::FeedbenchLerobotTrain => "the native loader's",
        };
        let setting = knob.setting();
        Err(Refusal::new(move |name| format!("{} is {whose}: {why}", name(setting))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_default_reads_back_through_its_own_text() {
        let defaults = LoaderConfig::default();
        for knob in LoaderKnob::ALL {
            let mut config = defaults.clone();
            knob.set(&mut config, &knob.default_text()).unwrap();
            assert_eq!(config, defaults, "{}", knob.key);
            if let FlagForm::Switch(value) = knob.form {
                knob.set(&mut config, value).unwrap();
                assert!(knob.is_set(&config), "{}: the switch changes the default", knob.key);
            }
        }
    }

    #[test]
    fn keys_and_flags_are_unique_and_spelled_alike() {
        for (i, a) in LoaderKnob::ALL.iter().enumerate() {
            for b in &LoaderKnob::ALL[i + 1..] {
                assert!(a.key != b.key && a.flag != b.flag, "{} and {}", a.key, b.key);
            }
            if let FlagForm::Value(_) = a.form {
                assert_eq!(a.flag.replace('-', "_"), a.key, "a value flag is its key");
            }
            assert!(a.flag.replace('-', "_").contains(a.key) || a.key == "images", "{}", a.key);
        }
    }

    #[test]
    fn checks_refuse_what_the_loader_cannot_take() {
        let refused = |key: &str, text: &str| {
            let mut config = LoaderConfig::default();
            LoaderKnob::by_key(key).unwrap().set(&mut config, text).unwrap_err()
        };
        assert_eq!(refused("batch", "0"), "0: expected at least 1");
        assert_eq!(refused("prefetch", "0"), "0: expected at least 1");
        assert_eq!(refused("decoder_threads", "17"), "17 is not 1 to 16");
        assert!(refused("workers", "-1").contains("expected a whole number"));
        assert!(refused("cache", "lots").contains("expected a size"));
        assert!(refused("drop_n_last_frames", "x").contains("or `window`"));
    }

    #[test]
    fn the_native_only_knobs_set_are_named_with_why() {
        let mut config = LoaderConfig::default();
        assert_eq!(LoaderKnob::lacking(&config, LoaderBackend::Lerobot).count(), 0);
        for (key, text) in [("decoder_threads", "2"), ("cache", "1GiB"), ("unordered", "true")] {
            LoaderKnob::by_key(key).unwrap().set(&mut config, text).unwrap();
        }
        let lacking = LoaderKnob::lacking(&config, LoaderBackend::Lerobot);
        let named: Vec<&str> = lacking.map(|(k, _)| k.key).collect();
        assert_eq!(named, ["decoder_threads", "cache", "unordered"]);
    }
}
