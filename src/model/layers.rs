//! Layer constructors with PyTorch's default initialisation, so that a freshly built model
//! starts from the same distribution as LeRobot's.

use tch::nn::{self, Init};

/// `nn.Linear` / `nn.ConvNd` default init: weights and bias uniform in ±1/√fan_in (what
/// `kaiming_uniform_(a=√5)` reduces to).
pub(crate) fn torch_default(fan_in: i64) -> Init {
    let bound = 1.0 / (fan_in as f64).sqrt();
    Init::Uniform { lo: -bound, up: bound }
}

/// `nn.Linear(in_dim, out_dim)`.
pub(crate) fn linear(vs: nn::Path, in_dim: i64, out_dim: i64) -> nn::Linear {
    let init = torch_default(in_dim);
    nn::linear(
        vs,
        in_dim,
        out_dim,
        nn::LinearConfig { ws_init: init, bs_init: Some(init), bias: true },
    )
}

/// `nn.Conv1d(in_c, out_c, k, stride, padding)` with bias.
pub(crate) fn conv1d(
    vs: nn::Path,
    in_c: i64,
    out_c: i64,
    k: i64,
    stride: i64,
    padding: i64,
) -> nn::Conv1D {
    let init = torch_default(in_c * k);
    let cfg =
        nn::ConvConfig { stride, padding, ws_init: init, bs_init: init, ..Default::default() };
    nn::conv1d(vs, in_c, out_c, k, cfg)
}

/// `nn.ConvTranspose1d(c, c, k, stride, padding)` with bias (its weight is `[in, out, k]`, so
/// PyTorch's fan-in is `out · k`).
pub(crate) fn conv_transpose1d(
    vs: nn::Path,
    c: i64,
    k: i64,
    stride: i64,
    padding: i64,
) -> nn::ConvTranspose1D {
    let init = torch_default(c * k);
    let cfg = nn::ConvTransposeConfig {
        stride,
        padding,
        ws_init: init,
        bs_init: init,
        ..Default::default()
    };
    nn::conv_transpose1d(vs, c, c, k, cfg)
}

/// `nn.GroupNorm(groups, channels)` (weight 1, bias 0, eps 1e-5).
pub(crate) fn group_norm(vs: nn::Path, groups: i64, channels: i64) -> nn::GroupNorm {
    nn::group_norm(vs, groups, channels, Default::default())
}
