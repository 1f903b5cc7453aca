//! The kinds of fact the loader's table ([`super::LoaderKnob::ALL`]) gives each knob: which
//! loaders it acts in, how the command line and configs give it, what tune does with it and
//! what a sweep's cells and report make of it.

/// Which loader delivers the batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum LoaderBackend {
    /// feedbench's own: Rust threads, FFmpeg, parquet.
    #[default]
    Native,
    /// LeRobot's: `LeRobotDataset` + `DataLoader` in Python.
    Lerobot,
    /// The DataLoader a lerobot-train run builds from its arguments, with its own loop
    /// (`--lerobot-train`).
    LerobotTrain,
    /// The same run with feedbench's reader as its dataset, as `feedbench-lerobot-train` runs
    /// it (the wheel's `feedbench.lerobot.FeedbenchDataset`, in the run's Python).
    FeedbenchLerobotTrain,
}

named_values!(LoaderBackend {
    Native => "native",
    Lerobot => "lerobot",
    LerobotTrain => "lerobot-train",
    FeedbenchLerobotTrain => "feedbench-lerobot-train",
});

impl LoaderBackend {
    /// Whether it is feedbench's own loader.
    pub fn is_native(&self) -> bool {
        *self == LoaderBackend::Native
    }

    /// Whether it is a lerobot-train run's DataLoader (with LeRobot's reader or feedbench's),
    /// which `--lerobot-train`'s arguments describe.
    pub fn is_a_training_run(&self) -> bool {
        matches!(self, LoaderBackend::LerobotTrain | LoaderBackend::FeedbenchLerobotTrain)
    }
}

/// Which loaders a knob acts in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// feedbench's loader and LeRobot's.
    Both,
    /// feedbench's loader alone; the text says why LeRobot's has none.
    Native(&'static str),
    /// LeRobot's loader alone (PyTorch's `DataLoader` knobs feedbench's loader has no use for);
    /// the text says why.
    Lerobot(&'static str),
}

/// How the command line gives a knob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagForm {
    /// `--flag VALUE`, the value named so in the help.
    Value(&'static str),
    /// `--flag` alone, which sets the knob to this text form.
    Switch(&'static str),
}

/// What `tune` does with a knob given on its command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TuneRole {
    /// Kept fixed while tune searches the rest.
    Fixed,
    /// Searched by tune itself: refused as a flag.
    Searched,
    /// A knob of one training process that tune has no use for: refused as a flag.
    NotTuned,
}

/// How a config file writes a knob's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TomlType {
    /// A number (`workers = [0, 1, 2]`); a value that is none (`window`) as a string.
    Integer,
    /// A string (`resolution = ["96x96"]`).
    Text,
    /// `true` or `false`.
    Boolean,
}

/// How a sweep's report treats cells that differ by a knob they carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CellRole {
    /// What a recommendation varies (workers, prefetch): cells differing by it are compared.
    Varied,
    /// A line of its own in each plot (the batch size).
    Line,
    /// Shared by a recommendation group and a plot.
    Shared,
}

/// How results store a knob's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// A number (`"workers": 2`).
    Number,
    /// Its text form (`"resolution": "96x96"`).
    Text,
    /// A number of bytes (`"cache_bytes": 4294967296`).
    Bytes,
}

/// The facts of a knob a sweep's cell carries, for its results and report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CellFacts {
    /// Its key in `results.jsonl` and its CSV column (`batch_size`).
    pub field: &'static str,
    /// What precedes its value in a cell id (`w` of `w2`).
    pub id_prefix: &'static str,
    /// How the report treats cells that differ by it.
    pub role: CellRole,
    /// Whether the step (the `model` phase) depends on it.
    pub model_phase: bool,
    /// How results store it.
    pub stored: Stored,
}
