//! The image encoder: ResNet18 with GroupNorm (no pretrained weights), a spatial softmax and a
//! linear + ReLU head, as LeRobot's `DiffusionRgbEncoder`.

use tch::nn::init::{FanInOut, NonLinearity, NormalOrUniform};
use tch::nn::{self, Init};
use tch::{Device, Kind, Tensor};

use super::layers::{group_norm, linear, torch_default};

/// torchvision's ResNet convolution init: Kaiming normal, fan-out, ReLU gain.
const RESNET_CONV_INIT: Init = Init::Kaiming {
    dist: NormalOrUniform::Normal,
    fan: FanInOut::FanOut,
    non_linearity: NonLinearity::ReLU,
};

/// Output side of a convolution or pooling along one axis.
fn conv_out(n: usize, k: usize, stride: usize, pad: usize) -> usize {
    (n + 2 * pad - k) / stride + 1
}

fn resnet_conv(vs: nn::Path, c_in: i64, c_out: i64, k: i64, stride: i64, pad: i64) -> nn::Conv2D {
    let cfg = nn::ConvConfig {
        stride,
        padding: pad,
        bias: false,
        ws_init: RESNET_CONV_INIT,
        ..Default::default()
    };
    nn::conv2d(vs, c_in, c_out, k, cfg)
}

/// BatchNorm replaced by GroupNorm with `channels / 16` groups, as LeRobot does.
fn resnet_norm(vs: nn::Path, channels: i64) -> nn::GroupNorm {
    group_norm(vs, channels / 16, channels)
}

/// torchvision's `BasicBlock` with GroupNorm.
#[derive(Debug)]
struct BasicBlock {
    conv1: nn::Conv2D,
    bn1: nn::GroupNorm,
    conv2: nn::Conv2D,
    bn2: nn::GroupNorm,
    downsample: Option<(nn::Conv2D, nn::GroupNorm)>,
}

impl BasicBlock {
    fn new(vs: nn::Path, c_in: i64, c_out: i64, stride: i64) -> Self {
        let downsample = (stride != 1 || c_in != c_out).then(|| {
            let d = &vs / "downsample";
            (resnet_conv(&d / "0", c_in, c_out, 1, stride, 0), resnet_norm(&d / "1", c_out))
        });
        BasicBlock {
            conv1: resnet_conv(&vs / "conv1", c_in, c_out, 3, stride, 1),
            bn1: resnet_norm(&vs / "bn1", c_out),
            conv2: resnet_conv(&vs / "conv2", c_out, c_out, 3, 1, 1),
            bn2: resnet_norm(&vs / "bn2", c_out),
            downsample,
        }
    }

    fn forward(&self, x: &Tensor) -> Tensor {
        let out = x.apply(&self.conv1).apply(&self.bn1).relu().apply(&self.conv2).apply(&self.bn2);
        let identity = match &self.downsample {
            Some((conv, norm)) => x.apply(conv).apply(norm),
            None => x.shallow_clone(),
        };
        (out + identity).relu()
    }
}

/// ResNet18 up to `layer4` (no average pool, no classifier).
#[derive(Debug)]
struct ResNet18 {
    conv1: nn::Conv2D,
    bn1: nn::GroupNorm,
    blocks: Vec<BasicBlock>,
}

impl ResNet18 {
    const WIDTHS: [i64; 4] = [64, 128, 256, 512];

    fn new(vs: nn::Path, in_channels: i64) -> Self {
        let mut blocks = Vec::new();
        let mut c_in = 64;
        for (i, &c_out) in Self::WIDTHS.iter().enumerate() {
            let layer = &vs / format!("layer{}", i + 1);
            let stride = if i == 0 { 1 } else { 2 };
            blocks.push(BasicBlock::new(&layer / "0", c_in, c_out, stride));
            blocks.push(BasicBlock::new(&layer / "1", c_out, c_out, 1));
            c_in = c_out;
        }
        ResNet18 {
            conv1: resnet_conv(&vs / "conv1", in_channels, 64, 7, 2, 3),
            bn1: resnet_norm(&vs / "bn1", 64),
            blocks,
        }
    }

    /// `(C, H, W)` of the `layer4` feature map for an `h × w` input.
    fn feature_shape(h: usize, w: usize) -> (usize, usize, usize) {
        let side = |n: usize| {
            let n = conv_out(conv_out(n, 7, 2, 3), 3, 2, 1); // conv1, max pool
            (0..3).fold(n, |n, _| conv_out(n, 3, 2, 1)) // layer2..4 stride 2
        };
        (512, side(h), side(w))
    }

    fn forward(&self, x: &Tensor) -> Tensor {
        let x = x.apply(&self.conv1).apply(&self.bn1).relu().max_pool2d(
            [3, 3],
            [2, 2],
            [1, 1],
            [1, 1],
            false,
        );
        self.blocks.iter().fold(x, |x, b| b.forward(&x))
    }
}

/// Spatial soft-argmax: a 1×1 convolution to `K` keypoint maps, a softmax over each map and
/// the expected `(x, y)` position in `[-1, 1]²`.
#[derive(Debug)]
struct SpatialSoftmax {
    nets: nn::Conv2D,
    /// `[H·W, 2]` grid of `(x, y)` coordinates, `np.linspace(-1, 1, ·)` along each axis.
    pos_grid: Tensor,
    hw: i64,
    keypoints: i64,
}

impl SpatialSoftmax {
    fn new(vs: nn::Path, (c, h, w): (usize, usize, usize), keypoints: i64) -> Self {
        let init = torch_default(c as i64);
        let cfg = nn::ConvConfig { ws_init: init, bs_init: init, ..Default::default() };
        let nets = nn::conv2d(&vs / "nets", c as i64, keypoints, 1, cfg);
        let lin =
            |n: usize, i: usize| if n > 1 { -1.0 + 2.0 * i as f64 / (n - 1) as f64 } else { -1.0 };
        let grid: Vec<f32> =
            (0..h * w).flat_map(|p| [lin(w, p % w) as f32, lin(h, p / w) as f32]).collect();
        let pos_grid =
            Tensor::from_slice(&grid).reshape([(h * w) as i64, 2]).to_device(vs.device());
        SpatialSoftmax { nets, pos_grid, hw: (h * w) as i64, keypoints }
    }

    /// `[N, C, H, W]` → `[N, K, 2]`.
    fn forward(&self, features: &Tensor) -> Tensor {
        let attention = features.apply(&self.nets).reshape([-1, self.hw]).softmax(-1, None);
        attention.matmul(&self.pos_grid.to_kind(attention.kind())).view([-1, self.keypoints, 2])
    }
}

/// LeRobot's `DiffusionRgbEncoder`: crop, ResNet18-GN, spatial softmax, linear + ReLU.
#[derive(Debug)]
pub struct RgbEncoder {
    backbone: ResNet18,
    pool: SpatialSoftmax,
    out: nn::Linear,
    crop: Option<(i64, i64)>,
    crop_is_random: bool,
    feature_dim: i64,
}

impl RgbEncoder {
    /// An encoder for `channels × h × w` images, cropped to `crop` (which must fit).
    pub fn new(
        vs: nn::Path,
        channels: i64,
        (h, w): (usize, usize),
        crop: Option<(usize, usize)>,
        crop_is_random: bool,
        keypoints: i64,
    ) -> Self {
        let (fh, fw) = crop.unwrap_or((h, w));
        let feature_map = ResNet18::feature_shape(fh, fw);
        RgbEncoder {
            backbone: ResNet18::new(&vs / "backbone", channels),
            pool: SpatialSoftmax::new(&vs / "pool", feature_map, keypoints),
            out: linear(&vs / "out", keypoints * 2, keypoints * 2),
            crop: crop.map(|(ch, cw)| (ch as i64, cw as i64)),
            crop_is_random,
            feature_dim: keypoints * 2,
        }
    }

    /// Width of one image's feature vector (`2 · keypoints`).
    pub fn feature_dim(&self) -> i64 {
        self.feature_dim
    }

    /// `[N, C, H, W]` normalised images → `[N, feature_dim]`. In training with a random crop,
    /// one crop offset is drawn for the whole batch (torchvision's `RandomCrop` on a batch).
    pub fn forward(&self, images: &Tensor, train: bool) -> Tensor {
        let x = match self.crop {
            Some((ch, cw)) => {
                let (h, w) = (images.size()[2], images.size()[3]);
                let (top, left) = if train && self.crop_is_random {
                    let draw = |n: i64| {
                        Tensor::randint(n, [1], (Kind::Int64, Device::Cpu)).int64_value(&[0])
                    };
                    (draw(h - ch + 1), draw(w - cw + 1))
                } else {
                    ((h - ch) / 2, (w - cw) / 2)
                };
                images.narrow(2, top, ch).narrow(3, left, cw)
            }
            None => images.shallow_clone(),
        };
        let keypoints = self.pool.forward(&self.backbone.forward(&x));
        keypoints.flatten(1, -1).apply(&self.out).relu()
    }
}
