//! A `lerobot-train` log, read (nothing is measured): each logged step's `data_s` (its
//! `dataloading_s`: the wait for the next batch, the conversion of its frames and the policy's
//! preprocessor, all in the main process) against its `updt_s` (`update_s`: forward, backward
//! and the optimizer), averaged by lerobot-train over each logging interval. The input-bound
//! share of a step is `data_s / (data_s + updt_s)`, the one feedbench's train phase gives; the
//! run's verdict is [`Verdict::of`] its time-weighted share, with the spread over the logged
//! steps beside it. `feedbench doctor LOG` prints its summary.
//!
//! Reading and judging are apart: `read` turns the log into its logged steps (and the run's
//! `num_workers` and `batch_size`), `summary` judges them (the share, its spread, the verdict
//! and what to try), and `epoch_stall` finds the wait a DataLoader that drains at each epoch's
//! end costs, where the log shows one; `page` lays the steps out as a page (`--html`).
//!
//! [`Verdict::of`]: crate::measure::verdict::Verdict::of

mod epoch_stall;
pub mod page;
mod read;
mod summary;

pub use epoch_stall::{EpochStall, STALL_EPOCHS, STALL_LEAST_S};
pub use read::{LoggedStep, TrainLog, TrainLogError, LONGEST_LINE};
pub use summary::LogSummary;

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::measure::verdict::Verdict;

    const LOG: &str = "\
INFO 2026-11-26 10:00:00 ot_train.py:272 {'batch_size': 8,
 'num_workers': 2,
 'seed': 1000}
INFO 2026-11-26 10:00:09 ot_train.py:640 step:1 smpl:8 ep:0 epch:0.03 loss:9.866 grdn:190.115 lr:1.0e-05 updt_s:12.000 data_s:3.000 smp/s:1
INFO 2026-11-26 10:00:21 ot_train.py:640 step:2 smpl:16 ep:0 epch:0.05 loss:8.712 grdn:140.010 lr:1.0e-05 updt_s:10.000 data_s:0.100 smp/s:1
INFO 2026-11-26 10:00:33 ot_train.py:640 step:3 smpl:24 ep:0 epch:0.08 loss:7.001 grdn:120.700 lr:1.0e-05 updt_s:10.000 data_s:0.300 smp/s:1
";

    #[test]
    fn steps_config_and_the_share_are_read_as_lerobot_train_logs_them() {
        let log = TrainLog::parse(Path::new("train.log"), LOG).unwrap();
        assert_eq!(log.steps.len(), 3);
        assert_eq!(
            log.steps[1],
            LoggedStep { step: 2.0, data_s: 0.1, update_s: 10.0, epoch: Some(0.05) }
        );
        assert_eq!((log.num_workers, log.batch_size), (Some(2), Some(8)));
        let summary = log.summary();
        assert_eq!((summary.logged_steps, summary.kept_steps), (3, 2), "the first left out");
        assert!((summary.share_pct - 100.0 * 0.4 / 20.4).abs() < 1e-9, "{summary:?}");
        assert_eq!(summary.verdict, Verdict::NotInputBound);
        assert!(summary.to_string().contains("(it had 2)"), "{summary}");
    }

    #[test]
    fn one_logged_step_is_not_judged_and_a_long_line_is_read_cut() {
        let one = TrainLog::parse(Path::new("l"), "step:1 updt_s:1.000 data_s:1.000").unwrap();
        let summary = one.summary();
        assert!(!summary.judged);
        assert!(summary.to_string().contains("1 logged step, the first"), "{summary}");
        assert!(!summary.to_string().contains("input-bound"), "no verdict: {summary}");
        // A line far longer than any step line: read, cut, and the steps around it kept.
        let long = format!(
            "{}\nstep:2 updt_s:1 data_s:0.5\nstep:3 updt_s:1 data_s:0.1",
            "x".repeat(200_000)
        );
        let log = TrainLog::parse(Path::new("l"), &long).unwrap();
        assert_eq!(log.steps.len(), 2);
        assert!(log.summary().judged);
        let cut = format!("step:4 updt_s:1 {}data_s:0.5", " ".repeat(LONGEST_LINE));
        assert!(TrainLog::parse(Path::new("l"), &cut).is_err(), "data_s cut off: no step");
    }

    #[test]
    fn later_names_big_step_numbers_and_bad_values() {
        let line = "step:1K smpl:64K ep:10 epch:1.00 loss:0.1 dataloading_s:0.250 update_s:0.750";
        let log = TrainLog::parse(Path::new("l"), line).unwrap();
        assert_eq!(
            log.steps,
            [LoggedStep { step: 1000.0, data_s: 0.25, update_s: 0.75, epoch: Some(1.0) }]
        );
        assert_eq!(log.summary().verdict, Verdict::HighlyInputBound, "one step, kept");
        let bad = TrainLog::parse(Path::new("l"), "a\nstep:2 updt_s:nan data_s:0.1").unwrap_err();
        assert_eq!(bad.to_string(), "l:2: `updt_s:nan` is not a number of seconds");
        let huge = TrainLog::parse(Path::new("l"), "step:2 updt_s:1 data_s:1.7e308").unwrap_err();
        assert_eq!(huge.to_string(), "l:1: `data_s:1.7e308` is not a number of seconds");
        let none = TrainLog::parse(Path::new("l"), "hello\nworld").unwrap_err();
        assert!(none.to_string().contains("no logged step"), "{none}");
    }

    /// A log of runs appended to one file (each resumed from a checkpoint: `step:` rises on,
    /// `epch:` starts again) is read as that many runs, the last one judged; its epoch spacing
    /// is the last run's, not one made of the first and last `epch:` of the whole file, which
    /// asked the stall's search for periods of thousands of steps per logged one and did not
    /// end.
    #[test]
    fn runs_appended_to_one_log_are_told_apart_and_the_last_is_read() {
        let mut text = String::new();
        let mut step = 0;
        for _run in 0..400 {
            for epch in [0.03, 0.05, 0.07, 0.1, 0.12] {
                step += 1;
                text.push_str(&format!(
                    "step:{step} smpl:4 ep:0 epch:{epch} updt_s:0.100 data_s:0.010\n"
                ));
            }
        }
        let log = TrainLog::parse(Path::new("l"), &text).unwrap();
        assert_eq!((log.runs, log.run_line, log.steps.len()), (400, 1996, 5));
        assert_eq!(log.steps[0].step, 1996.0);
        let summary = log.summary();
        assert!(summary.to_string().contains("The log holds 400 runs"), "{summary}");
        assert!(summary.to_string().contains("from line 1996, is read"), "{summary}");
        // A step that goes back begins a run too; one log's counters never do.
        let back =
            TrainLog::parse(Path::new("l"), "step:5 updt_s:1 data_s:1\nstep:1 updt_s:1 data_s:1");
        assert_eq!(back.unwrap().runs, 2);
        assert_eq!(TrainLog::parse(Path::new("l"), LOG).unwrap().runs, 1);
    }

    /// One run whose `epch:` barely rises over its steps (a huge dataset, every step logged):
    /// the stall's search is bounded by the steps it has, and ends.
    #[test]
    fn an_epoch_far_longer_than_the_log_ends_the_search_at_once() {
        let text: String = (1..=20_000)
            .map(|step| {
                let epch = 0.01 + step as f64 * 1e-7;
                let data_s = if step % 4000 == 0 { 2.0 } else { 0.01 };
                format!("step:{step} epch:{epch:.7} updt_s:0.100 data_s:{data_s}\n")
            })
            .collect();
        let log = TrainLog::parse(Path::new("l"), &text).unwrap();
        assert_eq!(log.runs, 1);
        assert_eq!(log.epoch_stall(), None, "no epoch starts within the log");
        assert_eq!(log.summary().logged_steps, 20_000);
    }
}
