//! feedbench: a native reader of LeRobot datasets and a benchmark of the data loader that
//! feeds a diffusion-policy training step.
//!
//! Data flows one way (see docs/design.md), and imports point down only:
//! `bench → measure → model, loader → dataset → timing`. [`timing`] is the ground floor
//! (timing tree, trace, clocks); [`dataset`] reads and writes the format, [`loader`] turns a
//! dataset into batches, [`model`] consumes them, [`measure`] measures one run of them (a
//! phase, its statistics and verdict) and [`mod@bench`] runs the studies made of such runs and
//! reports them.
//!
//! Knobs are typed values with one text form each (`96x96`, `episode-aware`, `diffusion:small`),
//! which the command line, the TOML configs and the results files all read and write.

/// Serde for a type through its text form: serialised with `Display`, read with `FromStr`
/// (whose error is the message), so that flags, configs and results spell it alike.
macro_rules! serde_as_text {
    ($type:ty) => {
        impl serde::Serialize for $type {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        impl<'de> serde::Deserialize<'de> for $type {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = String::deserialize(deserializer)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

/// A knob with a fixed set of named values: `ALL`, `name()`, `Display`, `FromStr` (names and
/// their aliases; any other text is an error listing the names) and serde as text.
macro_rules! named_values {
    ($type:ident { $($variant:ident => $name:literal $(| $alias:literal)*),+ $(,)? }) => {
        impl $type {
            /// Every value, in the order the names are listed.
            pub const ALL: &'static [$type] = &[$($type::$variant),+];

            /// Its name, as flags, configs and results files spell it.
            pub fn name(self) -> &'static str {
                match self {
                    $($type::$variant => $name),+
                }
            }
        }

        impl std::fmt::Display for $type {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl std::str::FromStr for $type {
            type Err = String;

            fn from_str(text: &str) -> Result<Self, String> {
                match text {
                    $($name $(| $alias)* => Ok($type::$variant),)+
                    _ => Err(format!("{text:?}: expected {}", [$($name),+].join(", "))),
                }
            }
        }

        serde_as_text!($type);
    };
}

pub mod bench;
pub mod dataset;
pub mod loader;
pub mod measure;
pub mod model;
#[cfg(any(test, feature = "testdata"))]
pub mod testdata;
pub mod timing;
