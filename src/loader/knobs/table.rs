//! The one table of the loader's knobs: [`LoaderKnob::ALL`] and each knob's row — its key,
//! flag and help, its reach, what tune and a sweep's cells make of it, and how its value is
//! read from its text form (checked) and written back.

use super::facts::{CellFacts, CellRole, FlagForm, Reach, Stored, TomlType, TuneRole};
use super::knob::LoaderKnob;
use crate::dataset::size::CacheSize;
use crate::dataset::Resolution;
use crate::loader::batch::ImageFormat;
use crate::loader::config::StartMethod;
use crate::loader::sampler::SamplerKind;

/// The most decoder threads a worker may ask for: FFmpeg's own limit for frame threading.
const MAX_DECODER_THREADS: usize = 16;

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
        Self::REQUESTS_IN_FLIGHT,
        Self::COALESCE,
        Self::SAMPLER,
        Self::SEED,
        Self::DROP_LAST,
        Self::DROP_N_LAST_FRAMES,
        Self::UNORDERED,
        Self::PIN_MEMORY,
        Self::PERSISTENT_WORKERS,
        Self::START_METHOD,
    ];

    /// Worker threads.
    pub const WORKERS: LoaderKnob = LoaderKnob {
        key: "workers",
        flag: "workers",
        form: FlagForm::Value("N"),
        help: "Worker threads (0: load in the consuming thread)",
        dataloader: Some("num_workers"),
        default_why: Some("LeRobot's"),
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
        help: "Batches in flight per worker, at least 1",
        dataloader: Some("prefetch_factor"),
        default_why: Some("DataLoader's"),
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
        dataloader: Some("batch_size"),
        default_why: None,
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
        dataloader: None,
        default_why: None,
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
               them again",
        dataloader: None,
        default_why: Some("none kept"),
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

    /// Range requests each worker keeps in flight reading a remote root.
    pub const REQUESTS_IN_FLIGHT: LoaderKnob = LoaderKnob {
        key: "requests_in_flight",
        flag: "requests-in-flight",
        form: FlagForm::Value("N"),
        help: "Range requests each worker keeps in flight reading a URL root (a batch's frames \
               fetched at once before they are decoded), 1 to 64; no effect on a local root",
        dataloader: None,
        default_why: None,
        reach: Reach::Native("LeRobot's loader reads local roots only"),
        tune: TuneRole::Fixed,
        toml: TomlType::Integer,
        omit_at_default: true,
        cell: Some(CellFacts {
            field: "requests_in_flight",
            id_prefix: "r",
            role: CellRole::Shared,
            model_phase: false,
            stored: Stored::Number,
        }),
        get: |c| c.requests_in_flight.to_string(),
        set: |c, t| {
            let requests: usize =
                t.trim().parse().map_err(|_| format!("{t:?}: expected 1 to 64"))?;
            if !(1..=64).contains(&requests) {
                return Err(format!("{requests} is not 1 to 64"));
            }
            c.requests_in_flight = requests;
            Ok(())
        },
    };

    /// How near two ranges of a remote file must lie to be fetched as one request.
    pub const COALESCE: LoaderKnob = LoaderKnob {
        key: "coalesce",
        flag: "coalesce",
        form: FlagForm::Value("SIZE"),
        help: "Ranges of a URL root's file at most this far apart (e.g. 32KiB, 1MiB, 0) are \
               fetched as one request, the gap read and dropped: fewer requests for more bytes",
        dataloader: None,
        default_why: None,
        reach: Reach::Native("LeRobot's loader reads local roots only"),
        tune: TuneRole::Fixed,
        toml: TomlType::Text,
        omit_at_default: true,
        cell: Some(CellFacts {
            field: "coalesce_bytes",
            id_prefix: "g",
            role: CellRole::Shared,
            model_phase: false,
            stored: Stored::Bytes,
        }),
        get: |c| CacheSize(c.coalesce_bytes).to_string(),
        set: |c, t| {
            c.coalesce_bytes = parsed::<CacheSize>(t)?.0;
            Ok(())
        },
    };

    /// The size camera frames are decoded at.
    pub const RESOLUTION: LoaderKnob = LoaderKnob {
        key: "resolution",
        flag: "resolution",
        form: FlagForm::Value("HxW"),
        help: "Resize camera frames to HxW (bilinear), e.g. 96x96, or `native`",
        dataloader: None,
        default_why: None,
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
        dataloader: None,
        default_why: None,
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
        dataloader: Some("drop_last"),
        default_why: None,
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
        dataloader: None,
        default_why: None,
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
               policy's: diffusion's horizon − n_action_steps − n_obs_steps + 1), or `window`",
        dataloader: None,
        default_why: Some("the window's, 7 for `diffusion`, 0 for `none`"),
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
        dataloader: None,
        default_why: None,
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
        dataloader: None,
        default_why: None,
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
        dataloader: Some("pin_memory"),
        default_why: None,
        reach: Reach::Lerobot(
            "feedbench's train phase pins the batches of a CUDA step itself, on a thread ahead \
             of the trainer, as lerobot-train has its DataLoader do",
        ),
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
        dataloader: Some("persistent_workers"),
        default_why: None,
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

    /// `multiprocessing_context`: how the workers start.
    pub const START_METHOD: LoaderKnob = LoaderKnob {
        key: "start_method",
        flag: "start-method",
        form: FlagForm::Value("METHOD"),
        help: "How LeRobot's DataLoader starts its workers: `fork`, `spawn` or `forkserver` \
               (`spawn` and `forkserver` send each worker the pickled dataset)",
        dataloader: Some("multiprocessing_context"),
        default_why: Some("PyTorch's on Linux"),
        reach: Reach::Lerobot("feedbench's workers are threads of one process: none is started"),
        tune: TuneRole::Fixed,
        toml: TomlType::Text,
        omit_at_default: true,
        cell: Some(CellFacts {
            field: "start_method",
            id_prefix: "m",
            role: CellRole::Shared,
            model_phase: false,
            stored: Stored::Text,
        }),
        get: |c| c.start_method.to_string(),
        set: |c, t| {
            c.start_method = parsed::<StartMethod>(t)?;
            Ok(())
        },
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loader::config::LoaderConfig;

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
}
