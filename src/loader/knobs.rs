//! The loader's knobs, each one unit: its key, its flag and help, its text form (parsed and
//! checked, and written back), its default, which loaders it acts in and what `tune` does with
//! it. [`LoaderKnob::ALL`] is the one table; the command line's flags, the refusals that name a
//! knob, LeRobot's native-only check and tune's refused flags all read it rather than list the
//! knobs again. The values live in [`LoaderConfig`](super::config::LoaderConfig), the one struct
//! that holds them.

mod facts;
mod knob;
mod table;

pub use facts::*;
pub use knob::LoaderKnob;
