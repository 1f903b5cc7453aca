//! Whether a baseline fits this run at all, before anything runs: every cell of the config is
//! in it and measures the same work ([`Workload`]: its knobs, its step, the dataset's
//! fingerprint, the runs' length), on the same host. Another workload is refused naming the
//! parameters that differ; another host is refused unless the user allows it, and then said.
//! Once the run has measured (and knows the LeRobot that read), other software on the same
//! host is said.

use super::config::GuardConfig;
use super::record::{DatasetFingerprint, GuardRecord};
use crate::measure::system::SystemInfo;
use crate::measure::workload::Workload;

/// A baseline that does not fit what is measured now.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Mismatch(pub String);

/// What this run measures on, to fit a baseline (or a history) to.
pub struct Now<'a> {
    /// The config.
    pub config: &'a GuardConfig,
    /// This host.
    pub machine: &'a SystemInfo,
    /// The dataset.
    pub dataset: &'a DatasetFingerprint,
    /// Each cell's workload, in the config's order.
    pub workloads: &'a [Workload],
    /// Whether another host is judged (`--allow-other-host`), with a warning that says so.
    pub allow_other_host: bool,
    /// Whether every warning is an error (`--strict`).
    pub strict: bool,
}

/// Checks the baseline against this run: cells by name and workload (another is an error);
/// another host is an error unless allowed, and then a warning; of a baseline saved before
/// workloads were kept, another dataset or other run lengths give warnings, returned (with
/// `strict`, errors).
pub fn check_baseline(baseline: &GuardRecord, now: &Now<'_>) -> Result<Vec<String>, Mismatch> {
    let names: Vec<&str> = baseline.cells.iter().map(|c| c.cell.name.as_str()).collect();
    let mut unstamped_cells = false;
    for (cell, workload) in now.config.cells.iter().zip(now.workloads) {
        let Some(saved) = baseline.cells.iter().find(|c| c.cell.name == cell.name) else {
            return Err(Mismatch(format!(
                "the baseline has no cell {:?} (it has {}): save a new baseline with \
                 --save-baseline",
                cell.name,
                names.join(", ")
            )));
        };
        match &saved.workload {
            Some(then) if then.hash != workload.hash => {
                return Err(Mismatch(format!(
                    "cell {:?} measures another workload than the baseline's ({} then, {} now: \
                     {}): save a new baseline with --save-baseline",
                    cell.name,
                    then.hash,
                    workload.hash,
                    then.differences(workload).join("; ")
                )))
            }
            Some(_) => {}
            None => unstamped_cells = true,
        }
        // A baseline whose keys were edited by hand after its workload was stamped.
        if saved.cell != *cell {
            return Err(Mismatch(format!(
                "cell {:?} has other knobs than in the baseline ({} now, {} then): save a new \
                 baseline with --save-baseline",
                cell.name,
                toml::to_string(cell).unwrap_or_default().replace('\n', " "),
                toml::to_string(&saved.cell).unwrap_or_default().replace('\n', " ")
            )));
        }
    }
    let mut warnings = if unstamped_cells { unstamped(baseline, now) } else { Vec::new() };
    let other_host = baseline.machine.other_host(now.machine);
    if !other_host.is_empty() {
        if !now.allow_other_host {
            return Err(Mismatch(format!(
                "the baseline was measured on another host ({}): judge on its host, save a \
                 baseline on this one, or pass --allow-other-host",
                other_host.join("; ")
            )));
        }
        warnings.push(format!(
            "judged against another host (--allow-other-host): {}",
            other_host.join("; ")
        ));
    }
    strictly(warnings, now.strict)
}

/// Once this run has measured on `measured` (the host with the software that read, LeRobot's
/// where its loader ran), where it ran other software than the `baseline`'s host: a warning
/// (with `strict`, an error).
pub fn check_software(
    baseline: &SystemInfo,
    measured: &SystemInfo,
    strict: bool,
) -> Result<Vec<String>, Mismatch> {
    let other_software = baseline.other_software(measured);
    let warnings = match other_software.is_empty() {
        true => Vec::new(),
        false => vec![format!("other software: {}", other_software.join("; "))],
    };
    strictly(warnings, strict)
}

/// `warnings`, or with `strict` and any warning, an error naming them.
fn strictly(warnings: Vec<String>, strict: bool) -> Result<Vec<String>, Mismatch> {
    if strict && !warnings.is_empty() {
        return Err(Mismatch(format!("--strict: {}", warnings.join("; "))));
    }
    Ok(warnings)
}

/// Of a baseline saved before workloads were kept, what its cells' knobs do not say: another
/// dataset or other run lengths, as warnings.
fn unstamped(baseline: &GuardRecord, now: &Now<'_>) -> Vec<String> {
    let mut warnings = Vec::new();
    let dataset = now.dataset;
    if baseline.dataset != *dataset {
        warnings.push(format!(
            "the dataset changed: {} files, {} bytes, sha256 {:.12} then; {} files, {} bytes, \
             sha256 {:.12} now",
            baseline.dataset.files,
            baseline.dataset.bytes,
            baseline.dataset.sha256,
            dataset.files,
            dataset.bytes,
            dataset.sha256
        ));
    }
    let (then, run) = (&baseline.run, &now.config.run);
    if (then.batches, then.warmup) != (run.batches, run.warmup) {
        warnings.push(format!(
            "runs of {} batches after {:?} warm-up in the baseline, {} after {:?} now",
            then.batches, then.warmup, run.batches, run.warmup
        ));
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::compare::guard::record::{CellRuns, BASELINE_FORMAT};
    use crate::loader::knobs::LoaderKnob;
    use crate::loader::lerobot::LerobotVersions;

    /// A config of one cell, `c`, of `batch` samples a batch.
    fn config(batch: usize) -> GuardConfig {
        let text = format!(
            "[dataset]\nsynth = \"pusht\"\n[[cell]]\nname = \"c\"\nworkers = 0\nbatch = {batch}\n"
        );
        toml::from_str(&text).unwrap()
    }

    /// A baseline of `config`'s cells on this machine, their workloads stamped where `stamped`.
    fn baseline(config: &GuardConfig, dataset: &DatasetFingerprint, stamped: bool) -> GuardRecord {
        let cells = (config.cells.iter())
            .map(|cell| CellRuns {
                cell: cell.clone(),
                runs: vec![],
                reference_ms: vec![],
                workload: stamped
                    .then(|| CellRuns::workload_of(cell, &config.run, dataset).unwrap()),
            })
            .collect();
        GuardRecord {
            feedbench_guard_baseline: BASELINE_FORMAT,
            measured_at: 0,
            machine: crate::measure::system::system_info(tch::Device::Cpu),
            dataset: dataset.clone(),
            run: config.run.clone(),
            cells,
        }
    }

    /// The dataset every run here reads now.
    fn dataset() -> DatasetFingerprint {
        DatasetFingerprint { files: 3, bytes: 100, sha256: "ab".into() }
    }

    /// Checks `baseline` against `config` run on `machine` over [`dataset`].
    fn check(
        baseline: &GuardRecord,
        config: &GuardConfig,
        machine: &SystemInfo,
        (allow_other_host, strict): (bool, bool),
    ) -> Result<Vec<String>, Mismatch> {
        let dataset = &dataset();
        let workloads: Vec<Workload> = (config.cells.iter())
            .map(|cell| CellRuns::workload_of(cell, &config.run, dataset).unwrap())
            .collect();
        let now = Now { config, machine, dataset, workloads: &workloads, allow_other_host, strict };
        check_baseline(baseline, &now)
    }

    #[test]
    fn another_workload_is_refused_naming_what_differs_and_another_host_unless_allowed() {
        let same = config(4);
        let saved = baseline(&same, &dataset(), true);
        let machine = saved.machine.clone();
        assert_eq!(check(&saved, &same, &machine, (false, true)).unwrap(), [""; 0]);
        // Another batch: another workload, named.
        let error = check(&saved, &config(8), &machine, (false, false)).unwrap_err().to_string();
        assert!(
            error.contains("another workload") && error.contains("batch 4 then → 8 now"),
            "{error}"
        );
        // Another dataset: another workload too.
        let mut other_data = saved.clone();
        other_data.dataset.sha256 = "cd".into();
        other_data.cells[0].workload =
            Some(CellRuns::workload_of(&same.cells[0], &same.run, &other_data.dataset).unwrap());
        let error = check(&other_data, &same, &machine, (false, false)).unwrap_err().to_string();
        assert!(error.contains("dataset.sha256 cd then → ab now"), "{error}");
        // Other software: not the host's facts, said once measured; with --strict, refused.
        let mut newer = machine.clone();
        newer.libavcodec = "99.0.0".into();
        assert_eq!(check(&saved, &same, &newer, (false, true)).unwrap(), [""; 0]);
        let warnings = check_software(&saved.machine, &newer, false).unwrap();
        assert!(warnings[0].starts_with("other software: libavcodec"), "{warnings:?}");
        assert!(check_software(&saved.machine, &newer, true).is_err());
        // The LeRobot that read, once a run of LeRobot's loader names it.
        let versions = LerobotVersions {
            lerobot: "0.6.1".into(),
            torch: "2.11.0".into(),
            python: "3.12.3".into(),
            executable: "/venv/bin/python".into(),
            video_backend: None,
            lerobot_train: None,
        };
        let read_by = machine.clone().read_by(Some(&versions));
        let warnings = check_software(&saved.machine, &read_by, false).unwrap();
        assert_eq!(
            warnings,
            ["other software: lerobot \"none\" then → \"0.6.1 (torch 2.11.0, Python 3.12.3)\" now"]
        );
        assert_eq!(check_software(&read_by, &read_by, true).unwrap(), [""; 0]);
        // Another host: refused unless allowed, then said.
        let mut other = machine.clone();
        other.cores += 1;
        let error = check(&saved, &same, &other, (false, false)).unwrap_err().to_string();
        assert!(
            error.contains("another host (cores") && error.contains("--allow-other-host"),
            "{error}"
        );
        let warnings = check(&saved, &same, &other, (true, false)).unwrap();
        assert!(warnings[0].starts_with("judged against another host"), "{warnings:?}");
    }

    #[test]
    fn a_baseline_saved_before_workloads_is_judged_by_its_knobs() {
        let same = config(4);
        let saved = baseline(&same, &dataset(), false);
        let machine = saved.machine.clone();
        assert_eq!(check(&saved, &same, &machine, (false, true)).unwrap(), [""; 0]);
        let mut wider = same.clone();
        let knobs = wider.cells[0].knobs.clone();
        wider.cells[0].knobs = knobs.with(&LoaderKnob::BATCH, [8]);
        let error = check(&saved, &wider, &machine, (false, false)).unwrap_err();
        assert!(error.to_string().contains("other knobs"), "{error}");
    }
}
