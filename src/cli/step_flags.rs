//! The step's flags: `train` and `tune` take its model and dtype beside the step's one
//! declaration ([`StepDeclaration`]); `sweep` and `guard` take its file alone ([`StepFrom`]),
//! laid over their configs. Each resolves once, its errors naming the flags.

use anyhow::Result;
use clap::Args;

use feedbench::model::{ModelSpec, Precision, StepChoice, StepDeclaration, StepError, StepFrom};

/// The training step's flags, shared by `train` and `tune`.
#[derive(Args)]
pub struct StepFlags {
    /// The step: `diffusion`, `synthetic:MS` (e.g. `synthetic:40ms`), `none`, or `policy`: a
    /// lerobot-train run's own (with --lerobot-train, where anything but a stand-in of fixed or
    /// replayed time is it).
    #[arg(long, default_value = "diffusion", conflicts_with_all = ["step_from", "step_ms"])]
    pub model: ModelSpec,
    /// Arithmetic: `f32` or `bf16` (autocast).
    #[arg(long, default_value = "f32")]
    pub dtype: Precision,
    /// The preset, the device, libtorch's threads, or a step's time or file instead of --model.
    #[command(flatten)]
    pub declared: StepDeclaration,
}

impl StepFlags {
    /// The step the flags choose, resolved once (`--step-from`'s file read here).
    pub fn choice(&self) -> Result<StepChoice> {
        self.declared.choice(&self.model, self.dtype).map_err(flagged)
    }
}

/// Whether `--step-from` was given to a command whose config declares its steps (`sweep`,
/// `guard`), its file read now so that a bad one is refused before any work.
pub fn step_from(from: &StepFrom) -> Result<bool> {
    let Some(model) = from.model() else { return Ok(false) };
    StepChoice::of(model).map_err(|e| flagged(e.into()))?;
    Ok(true)
}

/// A step declared wrong on the command line, naming the flag.
pub fn flagged(error: StepError) -> anyhow::Error {
    anyhow::anyhow!(error.worded(&|key| format!("--{}", key.replace('_', "-"))))
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use feedbench::bench::compare::guard::config::GuardCell;
    use feedbench::bench::sweep::config::SweepConfig;
    use feedbench::model::{DeviceChoice, StepOrder};

    use super::*;

    #[derive(Parser)]
    struct Line {
        #[command(flatten)]
        step: StepFlags,
    }

    /// The step declared by `train`'s flags, by a sweep's `[model]` and by a guard's cell.
    fn declared_three_ways(flags: &[&str], keys: &str) -> [StepDeclaration; 3] {
        let line = Line::try_parse_from([&["train"], flags].concat()).unwrap();
        let sweep: SweepConfig =
            toml::from_str(&format!("[dataset]\nsynth = \"pusht\"\n[model]\n{keys}")).unwrap();
        let cell = format!("name = \"c\"\nworkers = 0\nbatch = 4\n{keys}");
        let cell: GuardCell = toml::from_str(&cell).unwrap();
        [line.step.declared, sweep.model.declared, cell.declared_step]
    }

    #[test]
    fn every_front_end_declares_a_step_alike() {
        let replayed = declared_three_ways(
            &["--step-from", "/logs/train.log", "--step-order", "logged"],
            "step_from = \"/logs/train.log\"\nstep_order = \"logged\"\n",
        );
        let timed = declared_three_ways(&["--step-ms", "40"], "step_ms = 40\n");
        let model = declared_three_ways(
            &["--device", "cpu", "--threads", "2"],
            "device = \"cpu\"\nthreads = 2\n",
        );
        for declared in [&replayed, &timed, &model] {
            assert_eq!(declared[0], declared[1], "flags against a sweep's [model]");
            assert_eq!(declared[0], declared[2], "flags against a guard's cell");
        }
        assert_eq!(replayed[0].from.step_order, Some(StepOrder::Logged));
        assert_eq!(
            replayed[0].named_step().unwrap().unwrap().to_string(),
            "replay-in-order:/logs/train.log"
        );
        assert_eq!(timed[0].named_step().unwrap().unwrap().to_string(), "synthetic:40ms");
        assert_eq!((model[0].device, model[0].threads), (DeviceChoice::Cpu, Some(2)));
    }

    #[test]
    fn the_flags_name_what_is_wrong() {
        let choose = |flags: &[&str]| {
            let line = Line::try_parse_from([&["train"], flags].concat());
            line.map_err(|e| e.to_string()).and_then(|l| l.step.choice().map_err(|e| e.to_string()))
        };
        let zero = choose(&["--step-ms", "0"]).unwrap_err();
        assert_eq!(zero, "--step-ms 0: expected a step time in ms above 0");
        let missing = choose(&["--step-from", "/no/such/log"]).unwrap_err();
        assert!(missing.starts_with("--step-from /no/such/log: "), "{missing}");
        for both in
            [&["--model", "none", "--step-ms", "4"][..], &["--step-ms", "4", "--step-from", "/x"]]
        {
            let said = choose(both).unwrap_err();
            assert!(said.contains("cannot be used with"), "{both:?}: {said}");
        }
        let order = choose(&["--step-order", "logged"]).unwrap_err();
        assert!(order.contains("--step-from"), "{order}");
        let fixed = choose(&["--step-ms", "12.5"]).unwrap();
        assert_eq!(
            (fixed.spec().to_string(), fixed.device),
            ("synthetic:12.5ms".into(), DeviceChoice::Cpu)
        );
    }
}
