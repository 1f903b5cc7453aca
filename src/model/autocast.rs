//! bf16 autocast on CPU and CUDA.
//!
//! tch only exposes CUDA autocast with libtorch's default dtype (float16); PyTorch's
//! `torch.autocast(device, dtype=torch.bfloat16)` needs `at::autocast::set_autocast_dtype` and
//! the per-device `set_autocast_enabled`, which libtorch exports as C++ functions taking
//! `int8_t`-backed enums. They are declared here by their mangled names (checked against
//! libtorch 2.11.0's `libtorch_cpu.so`; a libtorch without them fails at link time, not at run
//! time).
//!
//! On a CPU without native bf16 arithmetic (no AVX512-BF16 / AMX) libtorch's bf16 kernels are
//! far slower than float32: on the 2-core development machine the `small` step ran ≈ 10×
//! slower under bf16. The option is there for CPUs that have it and for CUDA.

use tch::Device;

#[link(name = "torch_cpu")]
extern "C" {
    #[link_name = "_ZN2at8autocast20set_autocast_enabledEN3c1010DeviceTypeEb"]
    fn at_set_autocast_enabled(device_type: i8, enabled: bool);
    #[link_name = "_ZN2at8autocast19is_autocast_enabledEN3c1010DeviceTypeE"]
    fn at_is_autocast_enabled(device_type: i8) -> bool;
    #[link_name = "_ZN2at8autocast18set_autocast_dtypeEN3c1010DeviceTypeENS1_10ScalarTypeE"]
    fn at_set_autocast_dtype(device_type: i8, dtype: i8);
    #[link_name = "_ZN2at8autocast18get_autocast_dtypeEN3c1010DeviceTypeE"]
    fn at_get_autocast_dtype(device_type: i8) -> i8;
    #[link_name = "_ZN2at8autocast11clear_cacheEv"]
    fn at_clear_cache();
}

/// `c10::DeviceType::CPU` and `::CUDA`.
const DEVICE_CPU: i8 = 0;
const DEVICE_CUDA: i8 = 1;
/// `c10::ScalarType::BFloat16`.
const SCALAR_BFLOAT16: i8 = 15;

/// bf16 autocast for one device while alive; restores the previous state and clears the
/// cast-weight cache when dropped (as leaving a `torch.autocast` block does).
#[derive(Debug)]
pub struct Bf16Autocast {
    device_type: i8,
    prev_enabled: bool,
    prev_dtype: i8,
}

impl Bf16Autocast {
    /// Enables bf16 autocast for `device`'s type.
    pub fn enable(device: Device) -> Self {
        let device_type = if device.is_cuda() { DEVICE_CUDA } else { DEVICE_CPU };
        // SAFETY: plain libtorch calls on thread-local autocast state with valid enum values.
        unsafe {
            let prev_enabled = at_is_autocast_enabled(device_type);
            let prev_dtype = at_get_autocast_dtype(device_type);
            at_set_autocast_dtype(device_type, SCALAR_BFLOAT16);
            at_set_autocast_enabled(device_type, true);
            Bf16Autocast { device_type, prev_enabled, prev_dtype }
        }
    }
}

impl Drop for Bf16Autocast {
    fn drop(&mut self) {
        // SAFETY: as in `enable`; the values restored are the ones libtorch returned.
        unsafe {
            at_set_autocast_enabled(self.device_type, self.prev_enabled);
            at_set_autocast_dtype(self.device_type, self.prev_dtype);
            at_clear_cache();
        }
    }
}
