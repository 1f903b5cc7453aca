//! torch's backend settings lerobot-train makes before it builds a run, for a step that models
//! its step: cuDNN picks each convolution's algorithm by timing the candidates
//! (`torch.backends.cudnn.benchmark = True`) and float32 matmuls may run in TF32
//! (`torch.backends.cuda.matmul.allow_tf32 = True`). Both act on CUDA alone (TF32 rounds the
//! matmuls' inputs; the CPU's arithmetic is unchanged) and are off in libtorch by default.
//!
//! tch sets cuDNN's benchmark but reads neither setting back and has no TF32 switch: those
//! `at::Context` members of libtorch are declared here by their mangled names, as in
//! `autocast.rs` (checked against libtorch 2.11.0's `libtorch_cpu.so`).

use std::ffi::c_void;

#[link(name = "torch_cpu")]
extern "C" {
    #[link_name = "_ZN2at13globalContextEv"]
    fn at_global_context() -> *mut c_void;
    #[link_name = "_ZNK2at7Context14benchmarkCuDNNEv"]
    fn at_benchmark_cudnn(context: *const c_void) -> bool;
    #[link_name = "_ZN2at7Context18setAllowTF32CuBLASEb"]
    fn at_set_allow_tf32_cublas(context: *mut c_void, allowed: bool);
    #[link_name = "_ZNK2at7Context15allowTF32CuBLASEv"]
    fn at_allow_tf32_cublas(context: *const c_void) -> bool;
}

/// The settings as libtorch holds them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackendSettings {
    /// cuDNN times its algorithms and keeps the fastest per shape.
    pub cudnn_benchmark: bool,
    /// float32 matmuls on CUDA may use TF32.
    pub matmul_tf32: bool,
}

impl BackendSettings {
    /// What libtorch holds now.
    pub fn current() -> Self {
        // SAFETY: `globalContext()` returns libtorch's process-wide context (never null); the
        // getters read plain flags of it.
        unsafe {
            let context = at_global_context();
            BackendSettings {
                cudnn_benchmark: at_benchmark_cudnn(context),
                matmul_tf32: at_allow_tf32_cublas(context),
            }
        }
    }

    /// Sets what lerobot-train sets (a run without `--cudnn_deterministic=true`): both on.
    pub fn as_lerobot_train() -> Self {
        // SAFETY: as in `current`; the setters write plain flags of the context.
        unsafe {
            at_set_allow_tf32_cublas(at_global_context(), true);
        }
        tch::Cuda::cudnn_set_benchmark(true);
        Self::current()
    }
}
