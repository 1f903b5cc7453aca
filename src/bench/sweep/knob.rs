//! The knobs of a cell, each defined once ([`KnobDef`]): its name, its key in results and
//! its CSV column, its part of a cell id, whether it is shown only where it differs from its
//! default, and the sets it belongs to. Ids, the CSV, the model-phase key, the recommendation
//! groups, the plots and the report's order all read the one table, [`Knob::DEFS`]; a knob's
//! value in a cell is the cell's to give (`bench::sweep::cell`).

/// A knob of a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Knob {
    /// The dataset's name.
    Dataset,
    /// Loader worker threads.
    Workers,
    /// Batches in flight per worker.
    Prefetch,
    /// Samples per batch.
    Batch,
    /// `native` or `HxW`.
    Resolution,
    /// `f32` or `u8` frames.
    Images,
    /// The step.
    Model,
    /// `cpu` or `cuda`.
    Device,
    /// `f32` or `bf16`.
    Dtype,
    /// Threads inside each worker's video decoder.
    DecoderThreads,
    /// The decoded-frame cache's budget (`0`: none).
    Cache,
    /// `native` or `lerobot`.
    Loader,
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
#[derive(Debug, Clone, Copy)]
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
    pub unless: Option<&'static str>,
    /// Whether the `model` phase depends on it.
    pub model_phase: bool,
    /// Whether a recommendation group shares it.
    pub group: bool,
    /// Whether a plot shares it.
    pub plot: bool,
}

impl KnobDef {
    const fn new(knob: Knob, name: &'static str) -> Self {
        Self {
            knob,
            name,
            field: name,
            id_prefix: "",
            unless: None,
            model_phase: false,
            group: true,
            plot: true,
        }
    }

    const fn field(mut self, field: &'static str) -> Self {
        self.field = field;
        self
    }

    const fn id_prefix(mut self, prefix: &'static str) -> Self {
        self.id_prefix = prefix;
        self
    }

    const fn unless(mut self, value: &'static str) -> Self {
        self.unless = Some(value);
        self
    }

    const fn model_phase(mut self) -> Self {
        self.model_phase = true;
        self
    }

    /// Workers and prefetch: what a group varies.
    const fn varied(mut self) -> Self {
        self.group = false;
        self.plot = false;
        self
    }

    /// The batch size and the loader: a line each within a plot.
    const fn a_line(mut self) -> Self {
        self.plot = false;
        self
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
    /// Every knob's definition, in the order ids, columns and reports show them.
    pub const DEFS: [KnobDef; 12] = [
        KnobDef::new(Knob::Dataset, "dataset"),
        KnobDef::new(Knob::Workers, "workers").id_prefix("w").varied(),
        KnobDef::new(Knob::Prefetch, "prefetch").id_prefix("p").varied(),
        KnobDef::new(Knob::Batch, "batch")
            .field("batch_size")
            .id_prefix("b")
            .model_phase()
            .a_line(),
        KnobDef::new(Knob::Resolution, "resolution").model_phase(),
        KnobDef::new(Knob::Images, "images").model_phase(),
        KnobDef::new(Knob::Model, "model").model_phase(),
        KnobDef::new(Knob::Device, "device").model_phase(),
        KnobDef::new(Knob::Dtype, "dtype").model_phase(),
        KnobDef::new(Knob::DecoderThreads, "decoder_threads").id_prefix("t").unless("1"),
        KnobDef::new(Knob::Cache, "cache").field("cache_bytes").id_prefix("c").unless("0"),
        KnobDef::new(Knob::Loader, "loader").unless("native").a_line(),
    ];

    /// The knobs of `set`, in report order.
    pub fn set(set: KnobSet) -> Vec<Knob> {
        Self::DEFS.iter().filter(|d| d.belongs_to(set)).map(|d| d.knob).collect()
    }

    /// Its definition.
    pub fn def(self) -> &'static KnobDef {
        Self::DEFS.iter().find(|d| d.knob == self).expect("every knob is defined")
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
        use Knob::*;
        assert_eq!(
            Knob::set(KnobSet::ModelPhase),
            [Batch, Resolution, Images, Model, Device, Dtype]
        );
        assert_eq!(
            Knob::set(KnobSet::Group),
            [
                Dataset,
                Batch,
                Resolution,
                Images,
                Model,
                Device,
                Dtype,
                DecoderThreads,
                Cache,
                Loader
            ]
        );
        assert_eq!(
            Knob::set(KnobSet::Plot),
            [Dataset, Resolution, Images, Model, Device, Dtype, DecoderThreads, Cache]
        );
        assert_eq!(Knob::DEFS.len(), Knob::set(KnobSet::All).len());
    }

    #[test]
    fn names_and_fields_are_unique() {
        for (i, a) in Knob::DEFS.iter().enumerate() {
            assert_eq!(a.knob.def().name, a.name, "the table holds each knob once");
            for b in &Knob::DEFS[i + 1..] {
                assert_ne!(a.name, b.name);
                assert_ne!(a.field, b.field);
            }
        }
    }
}
