//! Feature statistics as LeRobot writes them (`compute_stats.py`): per episode min, max, mean,
//! std and count of every numeric feature (per component) and of every camera (per channel,
//! shape `[3, 1, 1]`, pixel values / 255, over a sample of the episode's frames, large frames
//! subsampled), and the dataset's statistics aggregated from the episodes' ones.

use serde_json::{json, Value as Json};

/// min, max, mean, std (population) per component, and the number of samples.
#[derive(Debug, Clone, PartialEq)]
pub struct FeatureStats {
    /// Smallest value per component.
    pub min: Vec<f64>,
    /// Largest value per component.
    pub max: Vec<f64>,
    /// Mean per component.
    pub mean: Vec<f64>,
    /// Standard deviation per component (population, as numpy's `std`).
    pub std: Vec<f64>,
    /// Frames (or sampled images) the statistics cover.
    pub count: u64,
    /// Image statistics: one value per channel, written with shape `[C, 1, 1]`.
    pub per_channel: bool,
}

impl FeatureStats {
    /// Statistics of `rows` (an iterator over frames, `width` values each) per component.
    pub fn of_rows<'a>(rows: impl IntoIterator<Item = &'a [f64]>, width: usize) -> Self {
        let mut acc = Accumulator::new(width);
        for row in rows {
            acc.add(row.iter().copied());
            acc.count += 1;
        }
        acc.finish(false, 1.0)
    }

    /// Statistics of the values of a vector feature, `width` per frame, frames in order.
    pub fn of_values(values: &[f32], width: usize) -> Self {
        let mut acc = Accumulator::new(width);
        for row in values.chunks_exact(width.max(1)) {
            acc.add(row.iter().map(|&v| f64::from(v)));
            acc.count += 1;
        }
        acc.finish(false, 1.0)
    }

    /// LeRobot's aggregation of episodes' statistics: min of mins, max of maxes, the
    /// count-weighted mean and the pooled standard deviation (parallel variance).
    pub fn aggregate(parts: &[FeatureStats]) -> Self {
        let Some(first) = parts.first() else {
            return FeatureStats {
                min: vec![],
                max: vec![],
                mean: vec![],
                std: vec![],
                count: 0,
                per_channel: false,
            };
        };
        let width = first.mean.len();
        let total: u64 = parts.iter().map(|p| p.count).sum();
        let per = |f: &dyn Fn(usize) -> f64| (0..width).map(f).collect::<Vec<f64>>();
        let mean =
            per(&|d| parts.iter().map(|p| p.mean[d] * p.count as f64).sum::<f64>() / total as f64);
        let std = per(&|d| {
            let pooled = parts
                .iter()
                .map(|p| (p.std[d].powi(2) + (p.mean[d] - mean[d]).powi(2)) * p.count as f64)
                .sum::<f64>();
            (pooled / total as f64).sqrt()
        });
        FeatureStats {
            min: per(&|d| parts.iter().map(|p| p.min[d]).fold(f64::INFINITY, f64::min)),
            max: per(&|d| parts.iter().map(|p| p.max[d]).fold(f64::NEG_INFINITY, f64::max)),
            mean,
            std,
            count: total,
            per_channel: first.per_channel,
        }
    }

    /// The JSON form of `stats.json` / `episodes_stats.jsonl`: lists per component (`[[[v]]]`
    /// per channel for images) and `count` as a one-element list.
    pub fn to_json(&self) -> Json {
        let shape = |values: &[f64]| -> Json {
            if self.per_channel {
                values.iter().map(|&v| json!([[v]])).collect()
            } else {
                Json::from(values.to_vec())
            }
        };
        json!({
            "min": shape(&self.min),
            "max": shape(&self.max),
            "mean": shape(&self.mean),
            "std": shape(&self.std),
            "count": [self.count],
        })
    }
}

/// Running sums per component.
struct Accumulator {
    min: Vec<f64>,
    max: Vec<f64>,
    sum: Vec<f64>,
    sum_sq: Vec<f64>,
    /// Values added per component.
    values: u64,
    /// Samples (frames or images) added.
    count: u64,
}

impl Accumulator {
    fn new(width: usize) -> Self {
        Self {
            min: vec![f64::INFINITY; width],
            max: vec![f64::NEG_INFINITY; width],
            sum: vec![0.0; width],
            sum_sq: vec![0.0; width],
            values: 0,
            count: 0,
        }
    }

    /// Adds one value per component.
    fn add(&mut self, row: impl Iterator<Item = f64>) {
        for (d, v) in row.enumerate() {
            self.min[d] = self.min[d].min(v);
            self.max[d] = self.max[d].max(v);
            self.sum[d] += v;
            self.sum_sq[d] += v * v;
        }
        self.values += 1;
    }

    /// The statistics, every value divided by `scale`.
    fn finish(self, per_channel: bool, scale: f64) -> FeatureStats {
        let n = self.values.max(1) as f64;
        let mean: Vec<f64> = self.sum.iter().map(|s| s / n).collect();
        let std = self
            .sum_sq
            .iter()
            .zip(&mean)
            .map(|(sq, m)| (sq / n - m * m).max(0.0).sqrt() / scale)
            .collect();
        FeatureStats {
            min: self.min.iter().map(|v| v / scale).collect(),
            max: self.max.iter().map(|v| v / scale).collect(),
            mean: mean.iter().map(|v| v / scale).collect(),
            std,
            count: self.count,
            per_channel,
        }
    }
}

/// How many frames of an episode of `len` frames LeRobot samples for image statistics
/// (`estimate_num_samples`: all below 100, then `len^0.75`, at least 100, at most 10 000).
pub fn estimate_num_samples(len: usize) -> usize {
    let min = len.min(100);
    ((len as f64).powf(0.75) as usize).min(10_000).max(min)
}

/// The frames of an episode of `len` frames whose images enter the statistics:
/// `round(linspace(0, len - 1, estimate_num_samples(len)))`, rounding half to even as numpy.
pub fn sample_indices(len: usize) -> Vec<usize> {
    let num = estimate_num_samples(len);
    match num {
        0 => vec![],
        1 => vec![0],
        _ => {
            let step = (len - 1) as f64 / (num - 1) as f64;
            (0..num)
                .map(|i| {
                    if i == num - 1 {
                        len - 1
                    } else {
                        (i as f64 * step).round_ties_even() as usize
                    }
                })
                .collect()
        }
    }
}

/// Image statistics of one camera over one episode, fed frame by frame: only the frames
/// [`sample_indices`] chooses count, subsampled as LeRobot's `auto_downsample_height_width`
/// does (every k-th row and column when the larger side is 300 pixels or more).
pub struct ImageStats {
    wanted: Vec<usize>,
    next: usize,
    step: usize,
    acc: Accumulator,
}

impl ImageStats {
    /// For an episode of `len` frames of `height × width` pixels.
    pub fn new(len: usize, height: u32, width: u32) -> Self {
        let (h, w) = (height as usize, width as usize);
        let step = if h.max(w) < 300 {
            1
        } else if w > h {
            (w / 150).max(1)
        } else {
            (h / 150).max(1)
        };
        Self { wanted: sample_indices(len), next: 0, step, acc: Accumulator::new(3) }
    }

    /// Whether frame `frame` of the episode enters the statistics.
    pub fn wants(&self, frame: usize) -> bool {
        self.wanted.get(self.next) == Some(&frame)
    }

    /// Adds frame `frame` (packed RGB24, `height × width × 3`) if it is one of the sampled
    /// frames; frames must come in order.
    pub fn add(&mut self, frame: usize, rgb: &[u8], width: u32) {
        while self.wants(frame) {
            let row_bytes = width as usize * 3;
            for row in rgb.chunks_exact(row_bytes).step_by(self.step) {
                for px in row.chunks_exact(3).step_by(self.step) {
                    self.acc.add(px.iter().map(|&v| f64::from(v)));
                }
            }
            self.acc.count += 1;
            self.next += 1;
        }
    }

    /// The statistics, per channel, in [0, 1].
    pub fn finish(self) -> FeatureStats {
        self.acc.finish(true, 255.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_indices_follow_lerobot() {
        assert_eq!(sample_indices(5), [0, 1, 2, 3, 4]);
        assert_eq!(estimate_num_samples(99), 99);
        assert_eq!(estimate_num_samples(300), 100);
        // The real G1 episode 0 (479 frames) has image statistics over 102 frames.
        assert_eq!(estimate_num_samples(479), 102);
        assert_eq!(estimate_num_samples(1000), 177);
        assert_eq!(estimate_num_samples(20_000), 1681);
        let picked = sample_indices(479);
        assert_eq!(picked.len(), 102);
        assert_eq!((picked[0], picked[101]), (0, 478));
        // np.round(np.linspace(0, 478, 102))[1] = round(4.73…) = 5
        assert_eq!(picked[1], 5);
        assert_eq!(sample_indices(2), [0, 1]);
        assert_eq!(sample_indices(1), [0]);
    }

    #[test]
    fn aggregate_equals_statistics_of_the_whole() {
        let a = [1.0f32, 10.0, 2.0, 20.0, 3.0, 30.0];
        let b = [7.0f32, 70.0, 9.0, 90.0];
        let whole: Vec<f32> = a.iter().chain(&b).copied().collect();
        let total = FeatureStats::of_values(&whole, 2);
        let pooled = FeatureStats::aggregate(&[
            FeatureStats::of_values(&a, 2),
            FeatureStats::of_values(&b, 2),
        ]);
        assert_eq!(pooled.count, 5);
        assert_eq!(
            (pooled.min.clone(), pooled.max.clone()),
            (total.min.clone(), total.max.clone())
        );
        for d in 0..2 {
            assert!((pooled.mean[d] - total.mean[d]).abs() < 1e-12);
            assert!((pooled.std[d] - total.std[d]).abs() < 1e-9);
        }
        assert_eq!(total.mean, [4.4, 44.0]);
    }

    #[test]
    fn image_stats_are_per_channel_in_unit_range() {
        // 2 frames of 2×2 pixels: channel 0 = 0 and 255, channel 1 = 51, channel 2 = frame * 255
        let frames = [
            [0u8, 51, 0, 255, 51, 0, 0, 51, 0, 255, 51, 0],
            [0, 51, 255, 255, 51, 255, 0, 51, 255, 255, 51, 255],
        ];
        let mut stats = ImageStats::new(2, 2, 2);
        for (i, f) in frames.iter().enumerate() {
            stats.add(i, f, 2);
        }
        let stats = stats.finish();
        assert_eq!(stats.count, 2);
        assert_eq!(stats.min, [0.0, 0.2, 0.0]);
        assert_eq!(stats.max, [1.0, 0.2, 1.0]);
        assert_eq!(stats.mean, [0.5, 0.2, 0.5]);
        assert!((stats.std[0] - 0.5).abs() < 1e-12 && stats.std[1].abs() < 1e-9);
        assert_eq!(stats.to_json()["mean"], json!([[[0.5]], [[0.2]], [[0.5]]]));
    }

    #[test]
    fn large_frames_are_subsampled() {
        let stats = ImageStats::new(1, 480, 640);
        assert_eq!(stats.step, 4);
        assert_eq!(ImageStats::new(1, 96, 96).step, 1);
    }
}
