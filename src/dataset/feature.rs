//! The features of `meta/info.json`: each key's type, shape and names, and what a video
//! feature's `info` block says of its files.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use serde_json::Value as Json;

use super::error::{DatasetError, Result};

/// The element type of a numeric feature, as numpy names it in info.json.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ScalarType {
    /// `float32`
    Float32,
    /// `float64`
    Float64,
    /// `int64`
    Int64,
    /// `int32`
    Int32,
    /// `bool`
    Bool,
}

impl ScalarType {
    fn parse(dtype: &str) -> Option<Self> {
        Some(match dtype {
            "float32" => Self::Float32,
            "float64" => Self::Float64,
            "int64" => Self::Int64,
            "int32" => Self::Int32,
            "bool" => Self::Bool,
            _ => return None,
        })
    }

    /// The numpy name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Float32 => "float32",
            Self::Float64 => "float64",
            Self::Int64 => "int64",
            Self::Int32 => "int32",
            Self::Bool => "bool",
        }
    }
}

/// What a feature holds and where it is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeatureKind {
    /// A numeric parquet column: a scalar (shape `[1]`) or a vector (shape `[N]`).
    Value(ScalarType),
    /// A string parquet column.
    String,
    /// Encoded PNG/JPEG images in a parquet `struct<bytes, path>` column.
    Image,
    /// Frames of an mp4 file per episode (v2) or per chunk of episodes (v3.0).
    Video,
    /// Language annotations (LeRobot's `language_persistent`, `language_events`: a list of
    /// structs per row), which LeRobot's items carry as Python lists of dicts and its default
    /// collate does not take: the reader reads no value of them (FeedbenchDataset adds them in
    /// Python, as LeRobot's are).
    Language,
}

impl FeatureKind {
    /// The dtype string of info.json.
    pub fn dtype_name(self) -> &'static str {
        match self {
            Self::Value(t) => t.name(),
            Self::String => "string",
            Self::Image => "image",
            Self::Video => "video",
            Self::Language => "language",
        }
    }
}

/// Height, width and channels of an image or video feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ImageShape {
    /// Rows.
    pub height: u32,
    /// Columns.
    pub width: u32,
    /// Colour channels (3 for RGB).
    pub channels: u32,
}

/// The `info` (or legacy `video_info`) block of a video feature. It describes episode 0
/// only: the files themselves are the truth (see [`mod@super::video::probe`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct VideoInfo {
    /// `video.codec` (av1, h264, hevc).
    pub codec: Option<String>,
    /// `video.pix_fmt`.
    pub pix_fmt: Option<String>,
    /// `video.height`.
    pub height: Option<u32>,
    /// `video.width`.
    pub width: Option<u32>,
    /// `video.fps`.
    pub fps: Option<f64>,
    /// `video.channels`.
    pub channels: Option<u32>,
    /// `has_audio`.
    pub has_audio: Option<bool>,
    /// `video.is_depth_map` (newer LeRobot writes `is_depth_map`).
    pub is_depth_map: Option<bool>,
    /// Every other key (`video.g`, `video.crf`, …) as written.
    pub other: BTreeMap<String, Json>,
}

impl VideoInfo {
    /// The block of a 3-channel stream without audio: codec, pixel format, size and rate.
    pub fn of_stream(codec: &str, pix_fmt: &str, height: u32, width: u32, fps: u32) -> Self {
        VideoInfo {
            codec: Some(codec.into()),
            pix_fmt: Some(pix_fmt.into()),
            height: Some(height),
            width: Some(width),
            fps: Some(f64::from(fps)),
            channels: Some(3),
            has_audio: Some(false),
            is_depth_map: Some(false),
            ..VideoInfo::default()
        }
    }

    pub(super) fn parse(block: &serde_json::Map<String, Json>) -> Self {
        let mut info = VideoInfo::default();
        for (key, value) in block {
            match key.as_str() {
                "video.codec" => info.codec = value.as_str().map(str::to_string),
                "video.pix_fmt" => info.pix_fmt = value.as_str().map(str::to_string),
                "video.height" => info.height = value.as_u64().map(|v| v as u32),
                "video.width" => info.width = value.as_u64().map(|v| v as u32),
                "video.fps" => info.fps = value.as_f64(),
                "video.channels" => info.channels = value.as_u64().map(|v| v as u32),
                "has_audio" => info.has_audio = value.as_bool(),
                "video.is_depth_map" | "is_depth_map" => info.is_depth_map = value.as_bool(),
                _ => {
                    info.other.insert(key.clone(), value.clone());
                }
            }
        }
        info
    }

    /// The `info` block as LeRobot writes it: `video.height`, `video.width`, `video.codec`,
    /// `video.pix_fmt`, `video.is_depth_map`, `video.fps`, `video.channels`, `has_audio`, then
    /// the other keys. Absent fields are left out.
    pub fn to_json(&self) -> Json {
        let mut block = serde_json::Map::new();
        let mut put = |key: &str, value: Option<Json>| {
            if let Some(value) = value {
                block.insert(key.to_string(), value);
            }
        };
        put("video.height", self.height.map(Json::from));
        put("video.width", self.width.map(Json::from));
        put("video.codec", self.codec.clone().map(Json::from));
        put("video.pix_fmt", self.pix_fmt.clone().map(Json::from));
        put("video.is_depth_map", self.is_depth_map.map(Json::from));
        put("video.fps", self.fps.map(number));
        put("video.channels", self.channels.map(Json::from));
        put("has_audio", self.has_audio.map(Json::from));
        for (key, value) in &self.other {
            block.insert(key.clone(), value.clone());
        }
        Json::Object(block)
    }
}

/// A JSON number: an integer when `value` is integral (info.json writes `"fps": 30`).
pub(super) fn number(value: f64) -> Json {
    if value.fract() == 0.0 && value.abs() < 9.0e15 {
        Json::from(value as i64)
    } else {
        Json::from(value)
    }
}

/// One entry of info.json's `features`.
#[derive(Debug, Clone, PartialEq)]
pub struct Feature {
    /// The key (`observation.state`, `observation.images.top`, `action`, …).
    pub name: String,
    /// What it holds.
    pub kind: FeatureKind,
    /// The declared shape.
    pub shape: Vec<usize>,
    /// Element names, flattened (`names` may be a list, nested lists or a one-entry map).
    pub names: Option<Vec<String>>,
    /// For images and videos: the frame size, from shape and names.
    pub image: Option<ImageShape>,
    /// For videos: the `info` block.
    pub video: Option<VideoInfo>,
}

impl Feature {
    /// Values per frame of a numeric or string feature (the product of the shape).
    pub fn width(&self) -> usize {
        self.shape.iter().product()
    }

    /// True for the columns every LeRobot dataset has (timestamp, frame_index, …).
    pub fn is_bookkeeping(&self) -> bool {
        matches!(
            self.name.as_str(),
            "timestamp" | "frame_index" | "episode_index" | "index" | "task_index"
        )
    }

    /// The entry as info.json holds it: `dtype`, `shape`, `names` (a flat list or null) and,
    /// for videos, the `info` block.
    pub fn to_json(&self) -> Json {
        let mut entry = serde_json::Map::new();
        entry.insert("dtype".into(), Json::from(self.kind.dtype_name()));
        entry.insert("shape".into(), Json::from(self.shape.clone()));
        entry.insert("names".into(), self.names.clone().map_or(Json::Null, Json::from));
        if let Some(video) = &self.video {
            entry.insert("info".into(), video.to_json());
        }
        Json::Object(entry)
    }

    pub(super) fn parse(name: &str, raw: &Json, info_path: &Path) -> Result<Self> {
        let invalid =
            |what: String| DatasetError::invalid(info_path, format!("feature `{name}`: {what}"));
        let object = raw.as_object().ok_or_else(|| invalid("expected an object".into()))?;
        let dtype = object
            .get("dtype")
            .and_then(Json::as_str)
            .ok_or_else(|| invalid("expected a string `dtype`".into()))?;
        let kind = match dtype {
            "video" => FeatureKind::Video,
            "image" => FeatureKind::Image,
            "string" => FeatureKind::String,
            "language" => FeatureKind::Language,
            other => FeatureKind::Value(ScalarType::parse(other).ok_or_else(|| {
                invalid(format!(
                    "unsupported dtype {other:?} (expected float32, float64, int64, int32, bool, string, language, image or video)"
                ))
            })?),
        };
        let shape: Vec<usize> = object
            .get("shape")
            .and_then(Json::as_array)
            .and_then(|dims| dims.iter().map(|d| d.as_u64().map(|d| d as usize)).collect())
            .ok_or_else(|| invalid("expected `shape` as a list of non-negative integers".into()))?;
        if matches!(kind, FeatureKind::Value(_)) && !(1..=5).contains(&shape.len()) {
            return Err(invalid(format!(
                "expected a `shape` of 1 to 5 dimensions (what LeRobot stores), found {shape:?}"
            )));
        }
        let names = object.get("names").and_then(flatten_names);
        let image = match kind {
            FeatureKind::Image | FeatureKind::Video => {
                Some(image_shape(&shape, names.as_deref()).ok_or_else(|| {
                    invalid(format!(
                        "expected an image shape [H, W, C] or [C, H, W], found {shape:?}"
                    ))
                })?)
            }
            _ => None,
        };
        let video = match kind {
            FeatureKind::Video => Some(
                object
                    .get("info")
                    .or_else(|| object.get("video_info"))
                    .and_then(Json::as_object)
                    .map(VideoInfo::parse)
                    .unwrap_or_default(),
            ),
            _ => None,
        };
        Ok(Feature { name: name.to_string(), kind, shape, names, image, video })
    }
}

/// Flattens `names`: null → None; a list, nested lists or a map of lists → one flat list.
fn flatten_names(value: &Json) -> Option<Vec<String>> {
    fn collect(value: &Json, out: &mut Vec<String>) {
        match value {
            Json::String(s) => out.push(s.clone()),
            Json::Array(items) => items.iter().for_each(|item| collect(item, out)),
            Json::Object(map) => map.values().for_each(|item| collect(item, out)),
            Json::Number(n) => out.push(n.to_string()),
            Json::Null | Json::Bool(_) => {}
        }
    }
    if value.is_null() {
        return None;
    }
    let mut out = Vec::new();
    collect(value, &mut out);
    Some(out)
}

/// Reads `[H, W, C]` or, when the names say so, `[C, H, W]`.
fn image_shape(shape: &[usize], names: Option<&[String]>) -> Option<ImageShape> {
    let &[a, b, c] = shape else { return None };
    let channels_first =
        names.and_then(|n| n.first()).is_some_and(|first| first.starts_with("channel"))
            || (names.is_none() && a <= 4 && c > 4);
    let (height, width, channels) = if channels_first { (b, c, a) } else { (a, b, c) };
    Some(ImageShape { height: height as u32, width: width as u32, channels: channels as u32 })
}
