//! How far a re-encoded frame is from its reference: PSNR and SSIM computed by FFmpeg's own
//! `psnr` and `ssim` filters (libavfilter), so that the figures are the ones the `ffmpeg` CLI
//! prints for the same frames, conventions included: PSNR over all planes weighted by their
//! sizes, the mean PSNR taken from the mean squared error over frames and the worst from the
//! worst frame's, SSIM's `All` the mean over frames.

use ffmpeg_next::filter;
use ffmpeg_next::format::Pixel;
use ffmpeg_next::frame;
use serde::{Deserialize, Serialize};

/// A quality measurement that could not be made.
#[derive(Debug, thiserror::Error)]
#[error("quality metrics: {0}")]
pub struct QualityError(String);

/// One frame's figures, as the filters attach them to it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FrameQuality {
    /// Mean squared error over every plane, weighted by the planes' sizes (`mse_avg`).
    pub mse: f64,
    /// PSNR of that error, dB (`psnr_avg`); infinite for identical frames.
    pub psnr_db: f64,
    /// SSIM over every plane, weighted by their sizes (`All`); 1 for identical frames.
    pub ssim: f64,
}

/// Figures over frames, as the CLI's summary lines give them. In JSON an infinite PSNR
/// (identical frames) is the string `"inf"`, as the CLI prints it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Quality {
    /// Frames compared.
    pub frames: usize,
    /// PSNR of the mean squared error over the frames, dB (the CLI's `average:`).
    #[serde(with = "decibels")]
    pub psnr_db: f64,
    /// PSNR of the worst frame, dB (the CLI's `min:`).
    #[serde(with = "decibels")]
    pub worst_psnr_db: f64,
    /// Mean SSIM over the frames (the CLI's `All:`).
    pub ssim: f64,
    /// SSIM of the worst frame.
    pub worst_ssim: f64,
}

/// PSNR in JSON: a number, or `"inf"` for identical frames (JSON has no infinity).
mod decibels {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(db: &f64, serializer: S) -> Result<S::Ok, S::Error> {
        if db.is_infinite() {
            serializer.serialize_str("inf")
        } else {
            serializer.serialize_f64(*db)
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Db {
            Number(f64),
            Text(String),
        }
        match Db::deserialize(deserializer)? {
            Db::Number(db) => Ok(db),
            Db::Text(text) if text == "inf" => Ok(f64::INFINITY),
            Db::Text(text) => {
                Err(serde::de::Error::custom(format!("PSNR {text:?}: expected dB or \"inf\"")))
            }
        }
    }
}

/// A frame of RGB planes (`3 × height × width` values, R then G then B, as the loader writes
/// them) in FFmpeg's planar `GBRP`, which the `psnr` and `ssim` filters take.
pub fn planar_rgb_frame(chw: &[u8], height: u32, width: u32) -> frame::Video {
    let mut frame = frame::Video::new(Pixel::GBRP, width, height);
    let (w, plane) = (width as usize, width as usize * height as usize);
    // GBRP's planes are G, B, R.
    for (target, source) in [(0, 1), (1, 2), (2, 0)] {
        let stride = frame.stride(target);
        let values = &chw[source * plane..(source + 1) * plane];
        let data = frame.data_mut(target);
        for (y, row) in values.chunks_exact(w).enumerate() {
            data[y * stride..y * stride + w].copy_from_slice(row);
        }
    }
    frame
}

/// The PSNR, dB, of a mean squared error for 8-bit samples, as FFmpeg's `get_psnr` has it.
fn psnr_of(mse: f64) -> f64 {
    10.0 * (255.0f64 * 255.0 / mse).log10()
}

impl Quality {
    /// The summary of `frames` (None when there are none).
    pub fn of(frames: &[FrameQuality]) -> Option<Self> {
        if frames.is_empty() {
            return None;
        }
        let n = frames.len() as f64;
        let worst_mse = frames.iter().map(|f| f.mse).fold(0.0, f64::max);
        Some(Self {
            frames: frames.len(),
            psnr_db: psnr_of(frames.iter().map(|f| f.mse).sum::<f64>() / n),
            worst_psnr_db: psnr_of(worst_mse),
            ssim: frames.iter().map(|f| f.ssim).sum::<f64>() / n,
            worst_ssim: frames.iter().map(|f| f.ssim).fold(f64::INFINITY, f64::min),
        })
    }
}

/// One filter graph: two buffer sources (distorted, reference) into `metric`, into a sink.
struct MetricGraph {
    graph: filter::Graph,
}

impl MetricGraph {
    fn new(metric: &str, width: u32, height: u32, pixel: Pixel) -> Result<Self, QualityError> {
        let error =
            |what: &str, e: ffmpeg_next::Error| QualityError(format!("{metric}: {what}: {e}"));
        let find = |name: &str| {
            filter::find(name).ok_or_else(|| QualityError(format!("libavfilter has no {name:?}")))
        };
        let mut graph = filter::Graph::new();
        let format: ffmpeg_next::ffi::AVPixelFormat = pixel.into();
        let args = format!(
            "video_size={width}x{height}:pix_fmt={}:time_base=1/25:pixel_aspect=1/1",
            format as i32
        );
        let buffer = find("buffer")?;
        let mut main = graph.add(&buffer, "main", &args).map_err(|e| error("source", e))?;
        let mut reference = graph.add(&buffer, "ref", &args).map_err(|e| error("source", e))?;
        let mut measure = graph.add(&find(metric)?, metric, "").map_err(|e| error("filter", e))?;
        let mut sink = graph.add(&find("buffersink")?, "out", "").map_err(|e| error("sink", e))?;
        main.link(0, &mut measure, 0);
        reference.link(0, &mut measure, 1);
        measure.link(0, &mut sink, 0);
        graph.validate().map_err(|e| error("graph", e))?;
        Ok(Self { graph })
    }

    /// Feeds a copy of each frame, stamped `pts` (a source takes its frame's buffers and
    /// leaves it empty).
    fn push(
        &mut self,
        distorted: &frame::Video,
        reference: &frame::Video,
        pts: i64,
    ) -> Result<(), QualityError> {
        let error = |e: ffmpeg_next::Error| QualityError(format!("feeding a frame: {e}"));
        let mut source = |name: &str, frame: &frame::Video| {
            let mut copy = frame.clone();
            copy.set_pts(Some(pts));
            let mut context = self.graph.get(name).expect("added in new");
            context.source().add(&copy).map_err(error)
        };
        source("main", distorted)?;
        source("ref", reference)
    }

    fn close(&mut self, pts: i64) -> Result<(), QualityError> {
        for name in ["main", "ref"] {
            let mut context = self.graph.get(name).expect("added in new");
            context.source().close(pts).map_err(|e| QualityError(format!("closing: {e}")))?;
        }
        Ok(())
    }

    /// The value of `key` on each frame the sink has ready, in order.
    fn drain(&mut self, keys: &[&str], out: &mut Vec<Vec<f64>>) -> Result<(), QualityError> {
        let mut sink = self.graph.get("out").expect("added in new");
        let mut frame = frame::Video::empty();
        while sink.sink().frame(&mut frame).is_ok() {
            let metadata = frame.metadata();
            let values = keys
                .iter()
                .map(|key| {
                    let text = metadata.get(key).ok_or_else(|| {
                        QualityError(format!("the filter set no {key} on a frame"))
                    })?;
                    text.trim()
                        .parse::<f64>()
                        .map_err(|_| QualityError(format!("{key} = {text:?} is not a number")))
                })
                .collect::<Result<Vec<f64>, _>>()?;
            out.push(values);
        }
        Ok(())
    }
}

/// Compares distorted frames with their references, frame by frame, through FFmpeg's `psnr`
/// and `ssim` filters. Frames of one meter share their size and 8-bit pixel format (YUV or
/// RGB, as the filters take them).
pub struct QualityMeter {
    psnr: MetricGraph,
    ssim: MetricGraph,
    pushed: i64,
    psnr_values: Vec<Vec<f64>>,
    ssim_values: Vec<Vec<f64>>,
}

const PSNR_KEYS: [&str; 2] = ["lavfi.psnr.mse_avg", "lavfi.psnr.psnr_avg"];
const SSIM_KEYS: [&str; 1] = ["lavfi.ssim.All"];

impl QualityMeter {
    /// A meter for frames of `width × height` in `pixel` format.
    pub fn new(width: u32, height: u32, pixel: Pixel) -> Result<Self, QualityError> {
        crate::dataset::video::probe::init_ffmpeg();
        Ok(Self {
            psnr: MetricGraph::new("psnr", width, height, pixel)?,
            ssim: MetricGraph::new("ssim", width, height, pixel)?,
            pushed: 0,
            psnr_values: Vec::new(),
            ssim_values: Vec::new(),
        })
    }

    /// Compares one `distorted` frame with its `reference` (the same size and format as the
    /// meter's).
    pub fn push(
        &mut self,
        distorted: &frame::Video,
        reference: &frame::Video,
    ) -> Result<(), QualityError> {
        self.psnr.push(distorted, reference, self.pushed)?;
        self.ssim.push(distorted, reference, self.pushed)?;
        self.pushed += 1;
        self.psnr.drain(&PSNR_KEYS, &mut self.psnr_values)?;
        self.ssim.drain(&SSIM_KEYS, &mut self.ssim_values)
    }

    /// Every frame's figures, in the order pushed.
    pub fn finish(mut self) -> Result<Vec<FrameQuality>, QualityError> {
        self.psnr.close(self.pushed)?;
        self.ssim.close(self.pushed)?;
        self.psnr.drain(&PSNR_KEYS, &mut self.psnr_values)?;
        self.ssim.drain(&SSIM_KEYS, &mut self.ssim_values)?;
        let pushed = self.pushed as usize;
        if self.psnr_values.len() != pushed || self.ssim_values.len() != pushed {
            return Err(QualityError(format!(
                "{pushed} frames compared, but the filters returned {} and {}",
                self.psnr_values.len(),
                self.ssim_values.len()
            )));
        }
        Ok(self
            .psnr_values
            .iter()
            .zip(&self.ssim_values)
            .map(|(psnr, ssim)| FrameQuality { mse: psnr[0], psnr_db: psnr[1], ssim: ssim[0] })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A YUV 4:2:0 frame whose luma is `luma(x, y)` and chroma flat grey.
    fn frame(width: u32, height: u32, luma: impl Fn(usize, usize) -> u8) -> frame::Video {
        let mut f = frame::Video::new(Pixel::YUV420P, width, height);
        let stride = f.stride(0);
        for y in 0..height as usize {
            for x in 0..width as usize {
                f.data_mut(0)[y * stride + x] = luma(x, y);
            }
        }
        for plane in 1..3 {
            f.data_mut(plane).fill(128);
        }
        f
    }

    #[test]
    fn identical_frames_are_infinite_psnr_and_ssim_one() {
        let reference = frame(32, 32, |x, y| ((x * 7 + y * 3) % 256) as u8);
        let mut meter = QualityMeter::new(32, 32, Pixel::YUV420P).unwrap();
        meter.push(&reference, &reference).unwrap();
        meter.push(&reference, &reference).unwrap();
        let frames = meter.finish().unwrap();
        assert_eq!(frames.len(), 2);
        assert!(frames.iter().all(|f| f.mse == 0.0 && f.psnr_db.is_infinite() && f.ssim == 1.0));
        let quality = Quality::of(&frames).unwrap();
        assert!(quality.psnr_db.is_infinite() && quality.worst_ssim == 1.0, "{quality:?}");
    }

    #[test]
    fn a_known_error_gives_its_psnr() {
        // Luma off by 4 everywhere, chroma exact: MSE 16 on Y, weighted 4/6 of the samples.
        let reference = frame(32, 32, |x, _| (x * 4) as u8);
        let distorted = frame(32, 32, |x, _| (x * 4 + 4) as u8);
        let mut meter = QualityMeter::new(32, 32, Pixel::YUV420P).unwrap();
        meter.push(&distorted, &reference).unwrap();
        let frames = meter.finish().unwrap();
        let mse = 16.0 * 4.0 / 6.0;
        assert!((frames[0].mse - mse).abs() < 1e-6, "{:?}", frames[0]);
        assert!((frames[0].psnr_db - psnr_of(mse)).abs() < 1e-4);
        assert!(frames[0].ssim < 1.0 && frames[0].ssim > 0.9, "{:?}", frames[0]);
        assert!(Quality::of(&[]).is_none());
    }
}
