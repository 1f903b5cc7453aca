//! A disk that fills (a small tmpfs, where root may mount one): under a sweep or a guard
//! baseline one clear error naming the path, finished results kept and a resume finishing once
//! there is room; likewise for a layout study, and one without room from the start is refused
//! making nothing; an encoder whose file cannot start on a full disk is an error, not SVT-AV1
//! waiting forever for its end of stream.

use crate::common;
use crate::faults::{names, spawn, video_dataset};

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use feedbench::dataset::write::{write_tabular, TabularSpec};

/// A tmpfs of `kib` KiB mounted at `at` (made), unmounted when dropped; None (with a note)
/// where this process may not mount one (not root, or no CAP_SYS_ADMIN in a container).
struct SmallDisk {
    at: PathBuf,
}

impl SmallDisk {
    fn mount(at: &Path, kib: u64) -> Option<Self> {
        std::fs::create_dir_all(at).unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
            .arg(at)
            .output()
            .is_ok_and(|o| o.status.success());
        if !mounted {
            eprintln!(
                "SKIPPED: cannot mount a tmpfs here (needs root); the full-disk test is skipped"
            );
            return None;
        }
        Some(Self { at: at.to_path_buf() })
    }

    /// Fills the disk but `free_kib` KiB with a file, which is returned.
    fn fill_but(&self, free_kib: u64) -> PathBuf {
        let filler = self.at.join("filler");
        let stats = feedbench::dataset::stage::available_bytes(&self.at).unwrap();
        std::fs::write(&filler, vec![1u8; (stats - free_kib * 1024) as usize]).unwrap();
        filler
    }

    /// Fills the disk to its last byte while others write to it, with a file that is
    /// returned.
    fn fill(&self) -> PathBuf {
        use std::io::Write;
        let filler = self.at.join("filler");
        let mut file = std::fs::File::create(&filler).unwrap();
        let chunk = vec![1u8; 4096];
        while file.write_all(&chunk).is_ok() {}
        // The last bytes of a page.
        while file.write_all(&[1]).is_ok() {}
        filler
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("--lazy").arg(&self.at).status();
    }
}

#[test]
fn a_sweep_on_a_disk_that_fills_stops_naming_the_path_keeps_its_results_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    // Room, once the filler goes, for the report and its page (1.4 MB, plotly.js in it).
    let Some(disk) = SmallDisk::mount(&dir.path().join("disk"), 4096) else { return };
    let root = video_dataset(dir.path());
    let config = dir.path().join("sweep.toml");
    let text = format!(
        "[dataset]\npath = \"{}\"\n[loader]\nwindow = \"none\"\nworkers = [0, 1, 2, 3]\n\
         batch = [2]\n[model]\nmodel = [\"synthetic:1ms\"]\n[run]\nloader_batches = 2\n\
         model_steps = 2\ntrain_steps = 2\nwarmup = 0\n",
        root.display()
    );
    std::fs::write(&config, text).unwrap();
    let out = disk.at.join("out");
    let args = ["sweep", "--config", config.to_str().unwrap(), "--out", out.to_str().unwrap()];
    // Room for the config, the lock, the trace and a cell or two (a line is about 4.3 kB).
    let filler = disk.fill_but(28);
    let (ok, _, err) = common::feedbench(&args);
    assert!(!ok, "the disk filled: {err}");
    assert!(err.contains(out.to_str().unwrap()) && err.contains("No space left"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    let kept = feedbench::bench::sweep::results::read_results(&out.join("results.jsonl")).unwrap();
    assert!((1..4).contains(&kept.len()), "the finished cells are kept: {}", kept.len());

    std::fs::remove_file(filler).unwrap();
    let (ok, _, err) = common::feedbench(&[&args[..], &["--resume"]].concat());
    assert!(ok, "{err}");
    let all = feedbench::bench::sweep::results::read_results(&out.join("results.jsonl")).unwrap();
    let ids: std::collections::HashSet<String> = all.iter().map(|r| r.cell.id()).collect();
    assert_eq!((all.len(), ids.len()), (4, 4), "each cell once");
    assert!(
        kept.iter().all(|k| all
            .iter()
            .any(|r| r.cell == k.cell && r.finished_unix_s == k.finished_unix_s)),
        "the kept cells are not measured again"
    );
}

#[test]
fn a_guard_baseline_on_a_full_disk_is_refused_naming_it_and_the_old_one_stays_whole() {
    let dir = tempfile::tempdir().unwrap();
    let Some(disk) = SmallDisk::mount(&dir.path().join("disk"), 128) else { return };
    let root = dir.path().join("ds");
    write_tabular(&root, &TabularSpec::default()).unwrap();
    let config = dir.path().join("guard.toml");
    let text = "[dataset]\npath = \"ds\"\n[run]\nrepeats = 3\nbatches = 2\ntolerance = \"10%\"\n\
                [[cell]]\nname = \"inline\"\nwindow = \"none\"\nworkers = 0\nbatch = 2\n";
    std::fs::write(&config, text).unwrap();
    let baseline = disk.at.join("baseline.json");
    let save = ["guard", "--config", config.to_str().unwrap(), "--save-baseline"];
    let save = [&save[..], &[baseline.to_str().unwrap()]].concat();
    let (ok, _, err) = common::feedbench(&save);
    assert!(ok, "{err}");
    let before = std::fs::read(&baseline).unwrap();

    let filler = disk.fill_but(0);
    let output = Command::new(env!("CARGO_BIN_EXE_feedbench")).args(&save).output().unwrap();
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "an error, not a regression: {err}");
    assert!(err.contains(baseline.to_str().unwrap()) && err.contains("No space left"), "{err}");
    assert_eq!(std::fs::read(&baseline).unwrap(), before, "the old baseline stays whole");
    assert_eq!(names(&disk.at), ["baseline.json", "filler"], "no half-written file left");

    std::fs::remove_file(filler).unwrap();
    let (ok, _, err) = common::feedbench(&save);
    assert!(ok, "saved once there is room: {err}");
}

#[test]
fn a_layout_study_without_room_is_refused_before_it_makes_anything() {
    let dir = tempfile::tempdir().unwrap();
    let Some(disk) = SmallDisk::mount(&dir.path().join("disk"), 1024) else { return };
    let out = disk.at.join("study");
    let args = small_layout_study(dir.path(), &out);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let _filler = disk.fill_but(100);
    let (ok, _, err) = common::feedbench(&args);
    assert!(!ok && err.contains("the candidates need about"), "{err}");
    assert!(!out.exists(), "a refused study makes no directory (it left .lock and layout.toml)");
}

/// The arguments of a layout study into `out`: a PushT-shaped source of 2 episodes of 16
/// frames at `dir/source`, and a config of four GOP candidates at `dir/layout.toml`.
fn small_layout_study(dir: &Path, out: &Path) -> Vec<String> {
    let source = dir.join("source");
    common::synth_pusht(&source, 2, 16, &[]);
    let config = dir.join("layout.toml");
    let text = "[axes]\ngop = [2, 4, 8, 16]\n[measure]\nworkers = 1\nbatch = 4\nbatches = 2\n\
                repeats = 2\nquality_frames = 4\n[choose]\nmin_psnr = 10\n";
    std::fs::write(&config, text).unwrap();
    [Path::new("layout"), &source, Path::new("--config"), &config, Path::new("--out"), out]
        .iter()
        .map(|p| p.to_str().unwrap().to_string())
        .collect()
}

/// Waits for `child` up to `limit`; a child still running then is killed and the test fails
/// (a study that hangs on a full disk is the fault looked for).
fn wait_within(child: &mut Child, limit: Duration) -> (bool, String) {
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > limit {
            child.kill().unwrap();
            panic!("still running after {limit:?} on a full disk");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    (status.success(), err)
}

#[test]
fn a_layout_study_on_a_disk_that_fills_stops_naming_the_path_keeps_its_results_and_resumes() {
    use feedbench::bench::layout_study::read_results;
    let dir = tempfile::tempdir().unwrap();
    let Some(disk) = SmallDisk::mount(&dir.path().join("disk"), 8192) else { return };
    let out = disk.at.join("study");
    let args = small_layout_study(dir.path(), &out);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let results = out.join("layout.jsonl");
    let mut child = spawn(&args);
    // The disk fills once the first candidate is measured.
    let started = Instant::now();
    while !std::fs::read_to_string(&results).is_ok_and(|t| t.ends_with('\n')) {
        assert!(child.try_wait().unwrap().is_none(), "it ended before its first result");
        assert!(started.elapsed() < Duration::from_secs(120), "no result in two minutes");
        std::thread::sleep(Duration::from_millis(10));
    }
    let filler = disk.fill();
    let (ok, err) = wait_within(&mut child, Duration::from_secs(120));
    assert!(!ok, "the disk filled: {err}");
    // Progress lines, then one error naming the path.
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "one error: {err}");
    assert!(
        errors[0].contains(out.to_str().unwrap()) && errors[0].contains("No space left"),
        "{err}"
    );
    let kept = read_results(&results).unwrap();
    assert!((1..4).contains(&kept.len()), "the finished candidates are kept: {}", kept.len());

    std::fs::remove_file(filler).unwrap();
    let mut child = spawn(&[&args[..], &["--resume"]].concat());
    let (ok, err) = wait_within(&mut child, Duration::from_secs(300));
    assert!(ok, "{err}");
    let all = read_results(&results).unwrap();
    let mut names: Vec<&str> = all.iter().map(|r| r.name.as_str()).collect();
    names.sort();
    names.dedup();
    assert_eq!((all.len(), names.len()), (4, 4), "each candidate once");
    for k in &kept {
        let again = all.iter().find(|r| r.name == k.name).unwrap();
        assert_eq!(
            serde_json::to_string(again).unwrap(),
            serde_json::to_string(k).unwrap(),
            "a kept candidate is not measured again"
        );
    }
}

#[test]
fn an_encoder_whose_file_cannot_start_on_a_full_disk_is_an_error_not_a_hang() {
    use feedbench::dataset::video::VideoCodec;
    use feedbench::dataset::write::encode::Mp4Writer;
    use feedbench::dataset::write::EncodeSettings;
    let dir = tempfile::tempdir().unwrap();
    let Some(disk) = SmallDisk::mount(&dir.path().join("disk"), 256) else { return };
    let _filler = disk.fill();
    let path = disk.at.join("episode_000000.mp4");
    let (to, from) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let written = (|| {
            let settings = EncodeSettings::lerobot(VideoCodec::Av1);
            let mut writer = Mp4Writer::create(&path, 64, 64, 10, &settings)?;
            writer.push_rgb(&[128u8; 64 * 64 * 3])?;
            writer.finish()
        })();
        let _ = to.send(written.map_err(|e| e.to_string()));
    });
    let written = from.recv_timeout(Duration::from_secs(60)).expect("an error, not a hang");
    let err = written.unwrap_err();
    assert!(err.contains("episode_000000.mp4") && err.contains("No space left"), "{err}");
}

#[test]
fn a_stage_from_a_url_to_a_disk_without_room_is_refused_before_it_copies() {
    let dir = tempfile::tempdir().unwrap();
    let www = dir.path().join("www");
    common::synth_pusht(&www.join("pusht"), 2, 150, &[]);
    let Some(nginx) = common::servers::Nginx::start(&www, dir.path()) else { return };
    let Some(disk) = SmallDisk::mount(&dir.path().join("disk"), 1024) else { return };
    let filler = disk.fill_but(16);
    let to = disk.at.join("copy");
    let root = format!("{}/pusht", nginx.origin);
    let (ok, _, err) = common::feedbench(&["stage", &root, "--to", to.to_str().unwrap()]);
    common::clear_error(ok, &err);
    assert!(err.contains(to.to_str().unwrap()) && err.contains("free on its file system"), "{err}");
    let left: Vec<PathBuf> = common::walk(&disk.at).into_iter().filter(|p| *p != filler).collect();
    assert!(left.is_empty(), "nothing made on the disk: {left:?}");
}

#[test]
fn a_stage_whose_disk_fills_midway_stops_naming_the_path_keeps_its_whole_files_and_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let www = dir.path().join("www");
    common::synth_pusht(&www.join("pusht"), 4, 60, &[]);
    let Some(nginx) = common::servers::Nginx::start(&www, dir.path()) else { return };
    let Some(disk) = SmallDisk::mount(&dir.path().join("disk"), 16384) else { return };
    // Room for every byte but not for every file: the disk's inodes (its root, the staging
    // directory, its manifest and one per file and directory copied) run out one short of the
    // end, whatever order the copies take: ENOSPC as a full disk gives it.
    let source = www.join("pusht");
    let files = common::walk(&source);
    let dirs: std::collections::BTreeSet<&Path> =
        files.iter().flat_map(|f| f.ancestors().skip(1).take_while(|d| *d != source)).collect();
    let entries = files.len() + dirs.len();
    remount(&disk, &format!("nr_inodes={}", entries + 2));
    let to = disk.at.join("copy");
    let root = format!("{}/pusht", nginx.origin);
    let args = ["stage", &root, "--to", to.to_str().unwrap()];
    let (ok, _, err) = common::feedbench(&args);
    common::clear_error(ok, &err);
    assert!(err.contains(disk.at.to_str().unwrap()) && err.contains("No space left"), "{err}");
    assert!(err.contains("run the same stage again"), "says how to go on: {err}");
    assert_eq!(err.lines().filter(|l| l.starts_with("error")).count(), 1, "one error: {err}");
    assert!(!to.exists(), "nothing under the final name until it is whole");
    let staging = feedbench::dataset::stage::staging_of(&to).unwrap();
    let kept: Vec<PathBuf> = common::walk(&staging)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "parquet" || e == "mp4"))
        .collect();
    assert!(!kept.is_empty(), "whole files are kept: {:?}", common::walk(&staging));
    let partial =
        common::walk(&staging).into_iter().find(|p| p.to_string_lossy().ends_with(".partial"));
    assert!(partial.is_none(), "no part of a file is left under any name: {partial:?}");

    remount(&disk, "nr_inodes=10000");
    let asked_before = nginx.requests().len();
    let (ok, _, err) = common::feedbench(&args);
    assert!(ok, "{err}");
    assert!(!staging.exists(), "the staging directory became the copy");
    for file in common::walk(&www.join("pusht")) {
        let name = file.strip_prefix(www.join("pusht")).unwrap();
        let copy = std::fs::read(to.join(name)).unwrap_or_else(|e| panic!("{name:?}: {e}"));
        assert!(copy == std::fs::read(&file).unwrap(), "{name:?} copied byte for byte");
    }
    let again = &nginx.requests()[asked_before..];
    for whole in &kept {
        let name = whole.strip_prefix(&staging).unwrap().to_string_lossy().to_string();
        assert!(
            !again.iter().any(|r| r.starts_with("GET") && r.contains(&name)),
            "{name} was kept whole and not fetched again: {again:?}"
        );
    }
}

/// Mounts `disk` again with `options` (tmpfs takes a new inode count on a remount).
fn remount(disk: &SmallDisk, options: &str) {
    let status = Command::new("mount")
        .args(["-o", &format!("remount,{options}")])
        .arg(&disk.at)
        .status()
        .unwrap();
    assert!(status.success(), "remount {options}");
}
