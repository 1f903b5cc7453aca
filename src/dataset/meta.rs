//! `meta/info.json`: codebase version, fps, path templates and the features.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value as Json;

use super::error::{DatasetError, Result};
use super::feature::number;
pub use super::feature::{Feature, FeatureKind, ImageShape, ScalarType, VideoInfo};

/// The layout versions this reader knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodebaseVersion {
    /// One parquet and one mp4 per episode, `meta/stats.json`.
    V20,
    /// One parquet and one mp4 per episode, `meta/episodes_stats.jsonl`.
    V21,
    /// Many episodes per file, episodes and tasks as parquet.
    V30,
}

impl CodebaseVersion {
    /// Parses the `codebase_version` string of info.json.
    pub fn parse(found: &str, info_path: &Path) -> Result<Self> {
        found.parse().map_err(|_| DatasetError::UnsupportedVersion {
            path: info_path.to_path_buf(),
            found: found.to_string(),
        })
    }

    /// True for the one-file-per-episode layouts (v2.0, v2.1).
    pub fn is_v2(self) -> bool {
        matches!(self, Self::V20 | Self::V21)
    }
}

named_values!(CodebaseVersion { V20 => "v2.0", V21 => "v2.1", V30 => "v3.0" });

/// The parsed `meta/info.json`.
#[derive(Debug, Clone, PartialEq)]
pub struct Info {
    /// The layout version.
    pub codebase_version: CodebaseVersion,
    /// `robot_type`, when given.
    pub robot_type: Option<String>,
    /// Frames per second of every feature.
    pub fps: f64,
    /// Episodes in the whole dataset.
    pub total_episodes: usize,
    /// Frames in the whole dataset.
    pub total_frames: usize,
    /// Tasks in the whole dataset.
    pub total_tasks: usize,
    /// v2: video files in the dataset.
    pub total_videos: Option<usize>,
    /// v2: chunk directories.
    pub total_chunks: Option<usize>,
    /// Episodes (v2) or files (v3.0) per chunk directory.
    pub chunks_size: usize,
    /// v3.0: target size of a data file.
    pub data_files_size_in_mb: Option<f64>,
    /// v3.0: target size of a video file.
    pub video_files_size_in_mb: Option<f64>,
    /// `splits`, e.g. `{"train": "0:100"}`.
    pub splits: BTreeMap<String, String>,
    /// The data file template.
    pub data_path: String,
    /// The video file template; None for datasets without videos.
    pub video_path: Option<String>,
    /// Every feature, in info.json order.
    pub features: Vec<Feature>,
}

#[derive(Deserialize)]
struct RawInfo {
    robot_type: Option<String>,
    fps: f64,
    total_episodes: usize,
    total_frames: usize,
    total_tasks: usize,
    total_videos: Option<usize>,
    total_chunks: Option<usize>,
    chunks_size: usize,
    data_files_size_in_mb: Option<f64>,
    video_files_size_in_mb: Option<f64>,
    #[serde(default)]
    splits: BTreeMap<String, String>,
    data_path: String,
    video_path: Option<String>,
    features: serde_json::Map<String, Json>,
}

/// Refuses frames stored as anything but Parquet: info.json's `storage_format` (LeRobot's main
/// writes "parquet", or "lance" for its Lance backend) before anything else is read, so that a
/// Lance dataset is never a parse error or a wrong read. Absent, it is Parquet.
fn check_storage_format(info: &Json, path: &Path) -> Result<()> {
    match info.get("storage_format") {
        None => Ok(()),
        Some(format) if format.as_str() == Some("parquet") => Ok(()),
        Some(format) if format.as_str() == Some("lance") => Err(DatasetError::invalid(
            path,
            "storage_format \"lance\": its frames are in Lance files, which feedbench does not \
             read; read it with LeRobot, or convert it back to Parquet (storage_format \"parquet\")",
        )),
        Some(other) => Err(DatasetError::invalid(
            path,
            format!("storage_format {other}: expected \"parquet\" (or LeRobot's \"lance\")"),
        )),
    }
}

impl Info {
    /// Reads and checks `root/meta/info.json`.
    pub fn load(root: &Path) -> Result<Self> {
        Self::read(root).map(|(info, _)| info)
    }

    /// [`Info::load`], with the document as the file holds it (every key, `names` as written):
    /// what LeRobot's metadata reads of the same file.
    pub fn read(root: &Path) -> Result<(Self, Json)> {
        let path = root.join("meta/info.json");
        if root.to_str().is_none() {
            return Err(DatasetError::invalid(
                root,
                "the path is not valid UTF-8, which FFmpeg and the JSON outputs need: rename the \
                 directory or reach it through a link with a UTF-8 name",
            ));
        }
        // A URL root (or one of an unknown scheme, refused naming it): its info.json is read.
        if super::remote::ObjectUrl::of(root)?.is_some() {
            let text = super::files::read_regular_text(&path)?;
            let document = Self::document(&text, &path)?;
            return Ok((Self::of_document(document.clone(), &path)?, document));
        }
        // What is there, said as it is: absent, a symlink loop, no permission, not a directory.
        match std::fs::metadata(root) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(DatasetError::io(
                    root,
                    std::io::Error::new(e.kind(), "no such dataset directory"),
                ));
            }
            Err(e) => return Err(DatasetError::io(root, e)),
            Ok(m) if !m.is_dir() => {
                return Err(DatasetError::invalid(root, "is not a directory: expected a dataset"))
            }
            Ok(_) => {}
        }
        match path.symlink_metadata() {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(DatasetError::invalid(
                    &path,
                    "missing: a LeRobot dataset has meta/info.json (is this the dataset root?)",
                ));
            }
            Err(e) => return Err(DatasetError::io(&path, e)),
            Ok(_) => {}
        }
        let text = super::files::read_regular_text(&path)?;
        let document = Self::document(&text, &path)?;
        Ok((Self::of_document(document.clone(), &path)?, document))
    }

    /// The JSON document of info.json's text.
    fn document(text: &str, path: &Path) -> Result<Json> {
        serde_json::from_str(text).map_err(|source| DatasetError::Json {
            path: path.to_path_buf(),
            line: None,
            source,
        })
    }

    /// Parses the text of an info.json file found at `path`.
    pub fn parse(text: &str, path: &Path) -> Result<Self> {
        Self::of_document(Self::document(text, path)?, path)
    }

    /// Checks the document of an info.json file found at `path`.
    fn of_document(value: Json, path: &Path) -> Result<Self> {
        // Check the version first: an unknown layout gets its own error, whatever else it holds.
        let version = value
            .get("codebase_version")
            .and_then(Json::as_str)
            .ok_or_else(|| DatasetError::invalid(path, "expected a string `codebase_version`"))?;
        let codebase_version = CodebaseVersion::parse(version, path)?;
        check_storage_format(&value, path)?;
        let raw: RawInfo = serde_path_to_error::deserialize(value)
            .map_err(|e| DatasetError::invalid(path, format!("`{}`: {}", e.path(), e.inner())))?;
        if !raw.fps.is_finite() || raw.fps <= 0.0 {
            return Err(DatasetError::invalid(
                path,
                format!("expected fps > 0, found {}", raw.fps),
            ));
        }
        if raw.chunks_size == 0 {
            return Err(DatasetError::invalid(path, "expected chunks_size ≥ 1, found 0"));
        }
        let features = raw
            .features
            .iter()
            .map(|(name, feature)| Feature::parse(name, feature, path))
            .collect::<Result<Vec<_>>>()?;
        for required in ["timestamp", "frame_index", "episode_index", "index", "task_index"] {
            if !features.iter().any(|f| f.name == required) {
                return Err(DatasetError::invalid(
                    path,
                    format!("expected the feature `{required}` that every LeRobot dataset has"),
                ));
            }
        }
        if features.iter().any(|f| f.kind == FeatureKind::Video) && raw.video_path.is_none() {
            return Err(DatasetError::invalid(path, "video features but no `video_path` template"));
        }
        Ok(Info {
            codebase_version,
            robot_type: raw.robot_type,
            fps: raw.fps,
            total_episodes: raw.total_episodes,
            total_frames: raw.total_frames,
            total_tasks: raw.total_tasks,
            total_videos: raw.total_videos,
            total_chunks: raw.total_chunks,
            chunks_size: raw.chunks_size,
            data_files_size_in_mb: raw.data_files_size_in_mb,
            video_files_size_in_mb: raw.video_files_size_in_mb,
            splits: raw.splits,
            data_path: raw.data_path,
            video_path: raw.video_path,
            features,
        })
    }

    /// The feature called `name`.
    pub fn feature(&self, name: &str) -> Option<&Feature> {
        self.features.iter().find(|f| f.name == name)
    }

    /// info.json as LeRobot writes it, keys in LeRobot's order; v2 keys (`total_videos`,
    /// `total_chunks`) and v3.0 keys (`*_files_size_in_mb`) only where they are set.
    /// [`Info::parse`] of its text gives back an equal value.
    pub fn to_json(&self) -> Json {
        let mut info = serde_json::Map::new();
        let mut put = |key: &str, value: Json| {
            info.insert(key.to_string(), value);
        };
        put("codebase_version", Json::from(self.codebase_version.to_string()));
        put("robot_type", self.robot_type.clone().map_or(Json::Null, Json::from));
        put("total_episodes", Json::from(self.total_episodes));
        put("total_frames", Json::from(self.total_frames));
        put("total_tasks", Json::from(self.total_tasks));
        if let Some(videos) = self.total_videos {
            put("total_videos", Json::from(videos));
        }
        if let Some(chunks) = self.total_chunks {
            put("total_chunks", Json::from(chunks));
        }
        put("chunks_size", Json::from(self.chunks_size));
        if let Some(mb) = self.data_files_size_in_mb {
            put("data_files_size_in_mb", number(mb));
        }
        if let Some(mb) = self.video_files_size_in_mb {
            put("video_files_size_in_mb", number(mb));
        }
        put("fps", number(self.fps));
        put("splits", serde_json::to_value(&self.splits).expect("string map"));
        put("data_path", Json::from(self.data_path.clone()));
        put("video_path", self.video_path.clone().map_or(Json::Null, Json::from));
        let features = self.features.iter().map(|f| (f.name.clone(), f.to_json())).collect();
        put("features", Json::Object(features));
        Json::Object(info)
    }

    /// The video features (cameras), in info.json order.
    pub fn video_keys(&self) -> impl Iterator<Item = &Feature> {
        self.features.iter().filter(|f| f.kind == FeatureKind::Video)
    }
}

/// A value substituted into a path template.
#[derive(Debug, Clone, Copy)]
pub enum TemplateValue<'a> {
    /// An integer field (`{episode_index:06d}`).
    Int(usize),
    /// A string field (`{video_key}`).
    Str(&'a str),
}

/// Fills a Python `str.format` path template such as
/// `data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet`.
/// Supports `{name}` and `{name:0Nd}`; an unknown field or spec is an error naming the template.
pub fn render_template(
    template: &str,
    fields: &[(&str, TemplateValue<'_>)],
    info_path: &Path,
) -> Result<PathBuf> {
    let bad = |what: String| {
        DatasetError::invalid(info_path, format!("path template {template:?}: {what}"))
    };
    let mut out = String::with_capacity(template.len() + 16);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..].find('}').ok_or_else(|| bad("unclosed `{`".into()))? + open;
        let field = &rest[open + 1..close];
        let (name, spec) = field.split_once(':').unwrap_or((field, ""));
        let value = fields
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| *v)
            .ok_or_else(|| bad(format!("unknown field `{name}`")))?;
        match (value, spec) {
            (TemplateValue::Str(s), "") => out.push_str(s),
            (TemplateValue::Int(i), "") | (TemplateValue::Int(i), "d") => {
                out.push_str(&i.to_string())
            }
            (TemplateValue::Int(i), spec) => {
                let width = spec
                    .strip_prefix('0')
                    .and_then(|s| s.strip_suffix('d'))
                    .and_then(|s| s.parse::<usize>().ok())
                    .ok_or_else(|| bad(format!("unsupported format spec `{spec}`")))?;
                out.push_str(&format!("{i:0width$}"));
            }
            (TemplateValue::Str(_), spec) => {
                return Err(bad(format!("unsupported format spec `{spec}` for `{name}`")))
            }
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    Ok(PathBuf::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"{
        "codebase_version": "v3.0", "robot_type": null, "fps": 10,
        "total_episodes": 1, "total_frames": 2, "total_tasks": 1, "chunks_size": 1000,
        "data_files_size_in_mb": 100, "video_files_size_in_mb": 200, "unknown_key": 7,
        "splits": {"train": "0:1"},
        "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
        "video_path": "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4",
        "features": {
            "observation.image": {"dtype": "video", "shape": [3, 96, 96],
                "names": ["channels", "height", "width"],
                "video_info": {"video.codec": "av1", "video.fps": 10.0, "video.g": 2}},
            "observation.state": {"dtype": "float32", "shape": [2], "names": {"motors": ["x", "y"]}},
            "action": {"dtype": "float32", "shape": [2], "names": [["x", "y"]], "fps": 10},
            "timestamp": {"dtype": "float32", "shape": [1], "names": null},
            "frame_index": {"dtype": "int64", "shape": [1], "names": null},
            "episode_index": {"dtype": "int64", "shape": [1], "names": null},
            "index": {"dtype": "int64", "shape": [1], "names": null},
            "task_index": {"dtype": "int64", "shape": [1], "names": null}
        }
    }"#;

    fn parse(text: &str) -> Result<Info> {
        Info::parse(text, Path::new("/d/meta/info.json"))
    }

    #[test]
    fn parses_names_in_every_form_and_the_legacy_video_block() {
        let info = parse(MINIMAL).unwrap();
        assert_eq!(info.codebase_version, CodebaseVersion::V30);
        let names = |key: &str| info.feature(key).unwrap().names.clone().unwrap();
        assert_eq!(names("observation.state"), ["x", "y"]);
        assert_eq!(names("action"), ["x", "y"]);
        assert!(info.feature("timestamp").unwrap().names.is_none());
        let camera = info.feature("observation.image").unwrap();
        assert_eq!(camera.image, Some(ImageShape { height: 96, width: 96, channels: 3 }));
        let video = camera.video.as_ref().unwrap();
        assert_eq!(video.codec.as_deref(), Some("av1"));
        assert_eq!(video.other.get("video.g"), Some(&Json::from(2)));
        assert_eq!(info.video_files_size_in_mb, Some(200.0));
    }

    #[test]
    fn to_json_round_trips_with_lerobot_video_keys() {
        let info = parse(MINIMAL).unwrap();
        let json = info.to_json();
        assert_eq!(parse(&json.to_string()).unwrap(), info);
        let block = &json["features"]["observation.image"]["info"];
        assert_eq!(block["video.codec"], "av1");
        assert_eq!(block["video.fps"], 10, "integral fps written as an integer");
        assert_eq!(block["video.g"], 2);
        assert_eq!(json["fps"], 10);
        assert!(json.get("total_chunks").is_none(), "v3.0 info has no total_chunks");

        let mut video = VideoInfo {
            codec: Some("hevc".into()),
            pix_fmt: Some("yuv420p".into()),
            height: Some(48),
            width: Some(64),
            fps: Some(30.0),
            channels: Some(3),
            has_audio: Some(false),
            is_depth_map: Some(false),
            other: BTreeMap::new(),
        };
        video.other.insert("video.crf".into(), Json::from(30));
        let block = video.to_json();
        let keys: Vec<&str> = block.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "video.height",
                "video.width",
                "video.codec",
                "video.pix_fmt",
                "video.is_depth_map",
                "video.fps",
                "video.channels",
                "has_audio",
                "video.crf"
            ]
        );
        assert_eq!(VideoInfo::parse(block.as_object().unwrap()), video);
    }

    #[test]
    fn real_g1_info_round_trips() {
        let root = crate::testdata::g1_partial_root();
        let Ok(info) = Info::load(&root) else {
            eprintln!("note: g1-partial absent, round trip on the real info.json skipped");
            return;
        };
        let again = Info::parse(&info.to_json().to_string(), Path::new("again.json")).unwrap();
        assert_eq!(again, info);
        let camera = info.feature("observation.images.cam_high").unwrap().video.as_ref().unwrap();
        assert_eq!(camera.is_depth_map, Some(false));
        assert_eq!(camera.has_audio, Some(false));
        assert!(camera.other.is_empty(), "{:?}", camera.other);
    }

    #[test]
    fn refuses_unknown_versions_by_name() {
        let text = MINIMAL.replace("\"v3.0\"", "\"v1.6\"");
        let err = parse(&text).unwrap_err().to_string();
        assert!(err.contains("/d/meta/info.json") && err.contains("v1.6"), "{err}");
    }

    #[test]
    fn names_a_missing_bookkeeping_feature_and_a_bad_dtype() {
        let text = MINIMAL.replace("\"task_index\": {", "\"task\": {");
        let err = parse(&text).unwrap_err().to_string();
        assert!(err.contains("`task_index`"), "{err}");
        let text = MINIMAL.replace(
            "\"dtype\": \"float32\", \"shape\": [2], \"names\": {",
            "\"dtype\": \"complex64\", \"shape\": [2], \"names\": {",
        );
        let err = parse(&text).unwrap_err().to_string();
        assert!(err.contains("observation.state") && err.contains("complex64"), "{err}");
        // LeRobot stores values of 1 to 5 dimensions (HF Sequence, Array2D to Array5D).
        let text = MINIMAL.replace(
            "\"dtype\": \"float32\", \"shape\": [2], \"names\": {",
            "\"dtype\": \"float32\", \"shape\": [1, 1, 1, 1, 1, 2], \"names\": {",
        );
        let err = parse(&text).unwrap_err().to_string();
        assert!(err.contains("observation.state") && err.contains("1 to 5 dimensions"), "{err}");
    }

    #[test]
    fn corrupt_json_names_the_file() {
        let err = parse("{\"codebase_version\": \"v2.1\", ").unwrap_err().to_string();
        assert!(err.starts_with("/d/meta/info.json"), "{err}");
    }

    #[test]
    fn renders_python_format_templates() {
        let info = Path::new("info.json");
        let path = render_template(
            "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4",
            &[
                ("episode_chunk", TemplateValue::Int(0)),
                ("video_key", TemplateValue::Str("observation.images.top")),
                ("episode_index", TemplateValue::Int(42)),
            ],
            info,
        )
        .unwrap();
        assert_eq!(
            path,
            PathBuf::from("videos/chunk-000/observation.images.top/episode_000042.mp4")
        );
        let err = render_template("x/{nope}.parquet", &[], info).unwrap_err().to_string();
        assert!(err.contains("unknown field `nope`"), "{err}");
    }
}
