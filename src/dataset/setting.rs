//! Refusals that name a setting of the user's, worded by the front end that took it: the
//! library names a setting by its config key (`drop_last`), the command line by its flag
//! (`--drop-last`), so that no library message names a flag a config user never typed.

use std::fmt;
use std::sync::Arc;

/// A setting of the user's that a refusal names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// Where a command writes its output.
    Out,
    /// Where a dataset is staged to.
    To,
    /// Replacing an existing output.
    Force,
    /// The Python that runs LeRobot's loader.
    Python,
    /// The arguments of a lerobot-train run whose loader and policy are measured.
    LerobotTrain,
    /// A knob of the loader, by its config key (the loader's table of knobs,
    /// `loader::knobs`, gives each front end its flag).
    Knob(&'static str),
}

impl Setting {
    /// Its key, as configs spell it.
    pub fn key(self) -> &'static str {
        match self {
            Setting::Out => "out",
            Setting::To => "to",
            Setting::Force => "force",
            Setting::Python => "python",
            Setting::LerobotTrain => "lerobot_train",
            Setting::Knob(key) => key,
        }
    }
}

/// How a front end names a setting.
pub type Naming<'a> = &'a dyn Fn(Setting) -> String;

/// A refusal whose text names settings: [`Refusal::worded`] makes it with a front end's names;
/// its `Display` uses the config keys.
#[derive(Clone)]
pub struct Refusal(Arc<dyn Fn(Naming) -> String + Send + Sync>);

impl Refusal {
    /// A refusal made by `text` from the names it is given.
    pub fn new(text: impl Fn(Naming) -> String + Send + Sync + 'static) -> Self {
        Self(Arc::new(text))
    }

    /// Its text with the settings named by `name`.
    pub fn worded(&self, name: Naming) -> String {
        (self.0)(name)
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.worded(&|s| s.key().to_string()))
    }
}

impl fmt::Debug for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Refusal({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_names_its_setting_as_each_front_end_does() {
        let refusal =
            Refusal::new(|name| format!("{} with 3 samples", name(Setting::Knob("drop_last"))));
        assert_eq!(refusal.to_string(), "drop_last with 3 samples");
        let upper = refusal.worded(&|s| s.key().to_uppercase());
        assert_eq!(upper, "DROP_LAST with 3 samples");
    }
}
