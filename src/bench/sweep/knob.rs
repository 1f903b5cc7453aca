//! The knobs of a cell ([`KnobDef`]): its name, its key in results and its CSV column, its
//! part of a cell id, whether it is shown only where it differs from its default, and the sets
//! it belongs to. The loader's knobs come with these facts from the loader's own table
//! ([`LoaderKnob::ALL`]); the sweep adds its own (dataset, step, loader). Ids, the CSV, the
//! model-phase key, the recommendation groups, the plots and the report's order all read
//! [`Knob::defs`]; a knob's value in a cell is the cell's to give (`bench::sweep::cell`).

use std::sync::OnceLock;

use crate::loader::knobs::{CellRole, LoaderKnob};

/// A knob of a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Knob {
    /// The dataset's name.
    Dataset,
    /// A knob of the loader's table that cells carry (its [`crate::loader::knobs::CellFacts`]).
    Loader(&'static LoaderKnob),
    /// The step.
    Model,
    /// `cpu` or `cuda`.
    Device,
    /// `f32` or `bf16`.
    Dtype,
    /// `native` or `lerobot`.
    Backend,
}

/// The sets a knob belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KnobSet {
    /// Every knob that is shown (always, or where a cell differs from its default).
    All,
    /// The knobs the `model` phase depends on: cells sharing them, and their repeat, share one
    /// model measurement.
    ModelPhase,
    /// The knobs a recommendation group shares: all but workers and prefetch.
    Group,
    /// The knobs a plot shares: those of a group but the batch size and the loader (one line
    /// per batch size and loader).
    Plot,
}

/// One knob's definition.
#[derive(Debug, Clone)]
pub struct KnobDef {
    /// The knob.
    pub knob: Knob,
    /// Its name, as the sweep config and the report spell it.
    pub name: &'static str,
    /// Its key in `results.jsonl` and its CSV column.
    pub field: &'static str,
    /// What precedes its value in a cell id (`w` of `w2`).
    pub id_prefix: &'static str,
    /// The value cells had before the knob existed: such a knob is left out of ids, columns
    /// and stored cells where it has that value, so that earlier results read and render as
    /// they did. None: always shown.
    pub unless: Option<String>,
    /// Whether the `model` phase depends on it.
    pub model_phase: bool,
    /// Whether a recommendation group shares it.
    pub group: bool,
    /// Whether a plot shares it.
    pub plot: bool,
}

impl KnobDef {
    /// A knob of the sweep's own, always shown, shared by groups and plots.
    fn own(knob: Knob, name: &'static str) -> Self {
        let (id_prefix, unless, model_phase, group, plot) = ("", None, false, true, true);
        Self { knob, name, field: name, id_prefix, unless, model_phase, group, plot }
    }

    /// A knob of the loader's table, with the facts the table gives it.
    fn of(knob: &'static LoaderKnob) -> Option<Self> {
        let facts = knob.cell.as_ref()?;
        Some(Self {
            knob: Knob::Loader(knob),
            name: knob.key,
            field: facts.field,
            id_prefix: facts.id_prefix,
            unless: knob.omit_at_default.then(|| knob.default_text()),
            model_phase: facts.model_phase,
            group: facts.role != CellRole::Varied,
            plot: facts.role == CellRole::Shared,
        })
    }

    fn belongs_to(&self, set: KnobSet) -> bool {
        match set {
            KnobSet::All => true,
            KnobSet::ModelPhase => self.model_phase,
            KnobSet::Group => self.group,
            KnobSet::Plot => self.plot,
        }
    }
}

impl Knob {
    /// Every knob's definition, in the order ids, columns and reports show them: the dataset,
    /// the loader's knobs cells always show, the step's, then the knobs added later (shown where
    /// they differ from their default) and the loader.
    pub fn defs() -> &'static [KnobDef] {
        static DEFS: OnceLock<Vec<KnobDef>> = OnceLock::new();
        DEFS.get_or_init(|| {
            let loader = || LoaderKnob::ALL.iter().filter_map(KnobDef::of);
            let step = [(Knob::Model, "model"), (Knob::Device, "device"), (Knob::Dtype, "dtype")];
            let step =
                step.map(|(knob, name)| KnobDef { model_phase: true, ..KnobDef::own(knob, name) });
            let backend = KnobDef {
                unless: Some("native".into()),
                plot: false,
                ..KnobDef::own(Knob::Backend, "loader")
            };
            std::iter::once(KnobDef::own(Knob::Dataset, "dataset"))
                .chain(loader().filter(|d| d.unless.is_none()))
                .chain(step)
                .chain(loader().filter(|d| d.unless.is_some()))
                .chain([backend])
                .collect()
        })
    }

    /// The knobs of `set`, in report order.
    pub fn set(set: KnobSet) -> Vec<Knob> {
        Self::defs().iter().filter(|d| d.belongs_to(set)).map(|d| d.knob).collect()
    }

    /// Its definition.
    pub fn def(self) -> &'static KnobDef {
        Self::defs().iter().find(|d| d.knob == self).expect("every knob is defined")
    }

    /// Its name, as the sweep config and the report spell it.
    pub fn name(self) -> &'static str {
        self.def().name
    }

    /// Its field in a cell as `results.jsonl` and the CSV header spell it.
    pub fn field(self) -> &'static str {
        self.def().field
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sets_are_as_the_report_uses_them() {
        let names = |set| Knob::set(set).into_iter().map(Knob::name).collect::<Vec<_>>().join(" ");
        // The loader's knobs added later (shown where they differ), after the step's.
        let later: Vec<&str> =
            LoaderKnob::carried().filter(|(k, _)| k.omit_at_default).map(|(k, _)| k.key).collect();
        let later = later.join(" ");
        assert_eq!(
            names(KnobSet::All),
            format!("dataset workers prefetch batch resolution images model device dtype {later} loader")
        );
        assert_eq!(names(KnobSet::ModelPhase), "batch resolution images model device dtype");
        assert_eq!(
            names(KnobSet::Group),
            format!("dataset batch resolution images model device dtype {later} loader")
        );
        assert_eq!(
            names(KnobSet::Plot),
            format!("dataset resolution images model device dtype {later}")
        );
        let fields: Vec<_> = Knob::defs().iter().map(|d| (d.field, d.id_prefix)).collect();
        assert_eq!(fields[3], ("batch_size", "b"));
        let unless: Vec<_> = Knob::defs().iter().filter_map(|d| d.unless.as_deref()).collect();
        assert_eq!(
            unless,
            ["1", "0", "8", "32768", "fork", "native"],
            "the knobs added later, at their default"
        );
    }

    #[test]
    fn names_and_fields_are_unique() {
        for (i, a) in Knob::defs().iter().enumerate() {
            assert_eq!(a.knob.def().name, a.name, "the table holds each knob once");
            for b in &Knob::defs()[i + 1..] {
                assert_ne!(a.name, b.name);
                assert_ne!(a.field, b.field);
            }
        }
    }
}
