//! LeRobot's feature statistics of generated datasets: the parquet columns' and the cameras'
//! (`meta/stats.json`, per episode and aggregated) as LeRobot computes them, and a camera's
//! against the real G1 episode's.

use crate::common;
use crate::synth::{generate, read_json, tiny, SEED};

use feedbench::dataset::stats::{sample_indices, ImageStats};
use feedbench::dataset::video::{DecodeOptions, FrameDecoder, VideoCodec, VideoDecoder};
use feedbench::dataset::write::scene::Motion;
use feedbench::dataset::write::synth::SynthOptions;
use feedbench::dataset::CodebaseVersion;
use serde_json::Value as Json;

#[test]
fn statistics_are_lerobots() {
    let preset = tiny(VideoCodec::H264, &[("observation.image", 48, 64)]);
    let lengths = preset.episode_lengths(SEED);
    let dims = preset.state_dim;
    let state_of = |e: usize| -> Vec<Vec<f32>> {
        let motion = Motion::new(SEED, e, dims);
        (0..lengths[e])
            .map(|f| {
                let mut s = vec![0f32; dims];
                motion.state(f as f64 / f64::from(preset.fps), &mut s);
                s
            })
            .collect()
    };
    let close = |a: &Json, b: f64| (a.as_f64().unwrap() - b).abs() < 1e-6;

    // v2.1: a line per episode, every feature, images per channel as [[[v]]] in [0, 1].
    let options = SynthOptions { version: CodebaseVersion::V21, seed: SEED, ..Default::default() };
    let (_dir, root) = generate(&preset, &options);
    let text = std::fs::read_to_string(root.join("meta/episodes_stats.jsonl")).unwrap();
    let lines: Vec<Json> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 3);
    for (e, line) in lines.iter().enumerate() {
        assert_eq!(line["episode_index"], e);
        let stats = &line["stats"];
        let keys: Vec<&str> = stats.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "observation.state",
                "action",
                "observation.image",
                "timestamp",
                "frame_index",
                "episode_index",
                "index",
                "task_index"
            ]
        );
        let states = state_of(e);
        for d in 0..dims {
            let column: Vec<f64> = states.iter().map(|s| f64::from(s[d])).collect();
            let mean = column.iter().sum::<f64>() / column.len() as f64;
            assert!(close(&stats["observation.state"]["mean"][d], mean));
            let min = column.iter().copied().fold(f64::INFINITY, f64::min);
            assert!(close(&stats["observation.state"]["min"][d], min));
        }
        assert_eq!(stats["observation.state"]["count"], serde_json::json!([lengths[e]]));
        assert_eq!(stats["frame_index"]["max"], serde_json::json!([(lengths[e] - 1) as f64]));
        let image = &stats["observation.image"];
        assert_eq!(image["count"], serde_json::json!([sample_indices(lengths[e]).len()]));
        for c in 0..3 {
            let mean = image["mean"][c][0][0].as_f64().unwrap();
            assert!(mean > 0.05 && mean < 0.95, "{mean}");
            assert!(image["min"][c][0][0].as_f64().unwrap() <= mean);
        }
    }

    // v3.0: stats.json aggregates the episodes; the episodes parquet has stats/ columns.
    let options = SynthOptions { seed: SEED, ..Default::default() };
    let (_dir, root) = generate(&preset, &options);
    let stats = read_json(&root.join("meta/stats.json"));
    let all: Vec<Vec<f32>> = (0..3).flat_map(state_of).collect();
    for d in 0..dims {
        let column: Vec<f64> = all.iter().map(|s| f64::from(s[d])).collect();
        let n = column.len() as f64;
        let mean = column.iter().sum::<f64>() / n;
        let std = (column.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt();
        assert!(close(&stats["observation.state"]["mean"][d], mean));
        assert!(close(&stats["observation.state"]["std"][d], std));
    }
    assert_eq!(stats["index"]["count"], serde_json::json!([lengths.iter().sum::<usize>()]));
    assert_eq!(stats["observation.image"]["mean"].as_array().unwrap().len(), 3);
    let file = std::fs::File::open(root.join("meta/episodes/chunk-000/file-000.parquet")).unwrap();
    let reader = parquet::file::reader::SerializedFileReader::new(file).unwrap();
    use parquet::file::reader::FileReader;
    let schema = reader
        .metadata()
        .file_metadata()
        .schema_descr()
        .root_schema()
        .get_fields()
        .iter()
        .map(|f| f.name().to_string())
        .collect::<Vec<_>>();
    for column in [
        "stats/observation.state/mean",
        "stats/observation.image/std",
        "stats/index/count",
        "videos/observation.image/from_timestamp",
    ] {
        assert!(schema.iter().any(|c| c == column), "{column} in {schema:?}");
    }
}

/// Image statistics sampled and subsampled as LeRobot does: on the real G1 episode 1 (decoded
/// frames stand in for the recorded ones), the count equals LeRobot's and the values are close.
#[test]
fn image_statistics_match_the_real_g1_episode() {
    let Some(root) = common::g1_partial() else { return };
    let key = "observation.images.cam_high";
    let path = root.join(format!("videos/chunk-000/{key}/episode_000001.mp4"));
    let text = std::fs::read_to_string(root.join("meta/episodes_stats.jsonl")).unwrap();
    let line: Json = text
        .lines()
        .map(|l| serde_json::from_str::<Json>(l).unwrap())
        .find(|l| l["episode_index"] == 1)
        .unwrap();
    let lerobot = &line["stats"][key];
    let length = 393;
    let mut stats = ImageStats::new(length, 480, 640);
    let mut decoder = VideoDecoder::new(DecodeOptions::default());
    let mut chw_frame = vec![0u8; 3 * 480 * 640];
    for frame in sample_indices(length) {
        decoder
            .decode_into(
                &path,
                &[frame as f64 / 30.0],
                feedbench::dataset::video::FrameBuffer::U8(&mut chw_frame),
            )
            .unwrap();
        let plane = 480 * 640;
        let rgb: Vec<u8> = (0..plane)
            .flat_map(|p| [chw_frame[p], chw_frame[plane + p], chw_frame[2 * plane + p]])
            .collect();
        stats.add(frame, &rgb, 640);
    }
    let ours = stats.finish().to_json();
    assert_eq!(ours["count"], lerobot["count"]);
    for stat in ["mean", "std"] {
        for c in 0..3 {
            let (a, b) =
                (ours[stat][c][0][0].as_f64().unwrap(), lerobot[stat][c][0][0].as_f64().unwrap());
            assert!((a - b).abs() < 0.01, "{stat}[{c}]: ours {a}, LeRobot's {b}");
        }
    }
}
