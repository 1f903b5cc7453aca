//! `stage`: copying datasets to fast storage.

use crate::common;

use feedbench::dataset::stage::{available_bytes, plan_stage, stage};
use feedbench::dataset::write::{write_tabular, ListLayout, TabularSpec};
use feedbench::dataset::{CodebaseVersion, Dataset, DatasetOptions, WindowSpec};

fn generated(version: CodebaseVersion) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ds");
    let spec = TabularSpec {
        version,
        episode_lengths: vec![5, 7, 3, 9],
        list_layout: ListLayout::List,
        ..Default::default()
    };
    write_tabular(&root, &spec).unwrap();
    (dir, root)
}

#[test]
fn a_staged_copy_reads_the_same_and_is_never_overwritten() {
    let (dir, root) = generated(CodebaseVersion::V30);
    let plan = plan_stage(&root, None).unwrap();
    assert!(plan
        .files
        .iter()
        .any(|f| f.path.ends_with("meta/episodes/chunk-000/file-000.parquet")));
    assert!(plan.files.iter().any(|f| f.path.ends_with("data/chunk-000/file-001.parquet")));
    let to = dir.path().join("shm/ds");
    assert_eq!(stage(&root, &to, &plan).unwrap().to, to);
    let (original, copy) = (Dataset::open(&root).unwrap(), Dataset::open(&to).unwrap());
    let window = original.window(&WindowSpec::diffusion()).unwrap();
    for index in [0, 6, 23] {
        assert_eq!(
            original.sample(index, &window).unwrap().arrays,
            copy.sample(index, &window).unwrap().arrays
        );
    }
    let err = stage(&root, &to, &plan).unwrap_err().to_string();
    assert!(err.contains("already exists"), "{err}");
}

#[test]
fn staging_some_episodes_copies_only_their_files() {
    let (dir, root) = generated(CodebaseVersion::V21);
    let plan = plan_stage(&root, Some(&[1, 3])).unwrap();
    let data: Vec<_> = plan.files.iter().filter(|f| f.path.starts_with("data")).collect();
    assert_eq!(data.len(), 2, "{data:?}");
    let to = dir.path().join("subset");
    stage(&root, &to, &plan).unwrap();
    let options = DatasetOptions { episodes: Some(vec![1, 3]), ..Default::default() };
    assert_eq!(Dataset::open_with(&to, &options).unwrap().num_frames(), 16);
    assert!(plan_stage(&root, Some(&[9])).unwrap_err().to_string().contains("episode 9"));
}

#[test]
fn a_missing_file_of_a_chosen_episode_is_named_and_free_space_is_known() {
    let Some(g1) = common::g1_partial() else { return };
    let err = plan_stage(&g1, Some(&[0])).unwrap_err().to_string();
    assert!(err.contains("episode_000000.mp4"), "{err}");
    let plan = plan_stage(&g1, Some(&[1, 2])).unwrap();
    assert_eq!(
        plan.files.iter().filter(|f| f.path.extension().is_some_and(|e| e == "mp4")).count(),
        2
    );
    assert!(available_bytes(std::path::Path::new("/tmp/does/not/exist/yet")).unwrap() > 0);
}
