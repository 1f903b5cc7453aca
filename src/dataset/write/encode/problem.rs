//! A value the encoder would refuse, named by setting: what [`crate::dataset::DatasetError`]
//! carries for it, so that the dataset's one error type needs nothing else of the writer.

/// An encoder setting [`EncodeSettings::problem`](super::EncodeSettings::problem) can refuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncodeSetting {
    /// The pixel format.
    PixFmt,
    /// The keyframe interval.
    Gop,
    /// The constant rate factor.
    Crf,
    /// The encoder's speed preset.
    Speed,
    /// The B-frames between reference frames.
    Bframes,
}

impl EncodeSetting {
    /// How a message names it: `pix_fmt`, `gop`, `crf`, `encoder preset`.
    pub fn label(self) -> &'static str {
        match self {
            EncodeSetting::PixFmt => "pix_fmt",
            EncodeSetting::Gop => "gop",
            EncodeSetting::Crf => "crf",
            EncodeSetting::Speed => "encoder preset",
            EncodeSetting::Bframes => "bframes",
        }
    }
}

/// A value the encoder would refuse, naming no flag or key: each front end says where it came
/// from ([`EncodeProblem::from_source`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} {value}: {expected}", setting.label())]
pub struct EncodeProblem {
    /// Which setting.
    pub setting: EncodeSetting,
    /// Its value, as written.
    pub value: String,
    /// What the encoder takes.
    pub expected: String,
}

impl EncodeProblem {
    /// The message with where the value came from: `crf 99 (--crf): libsvtav1 takes 0 to 63`.
    pub fn from_source(&self, source: &str) -> String {
        format!("{} {} ({source}): {}", self.setting.label(), self.value, self.expected)
    }
}
