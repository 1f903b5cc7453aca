//! A batch's values as host tensors: views of the loader's memory, the start of every step's
//! way onto the device.

use super::error::ModelError;

/// `host` copied into memory page-locked for `device` (a CUDA device; libtorch without CUDA
/// refuses). libtorch's `_pin_memory`, which `pin_memory` calls: tch's `pin_memory` always
/// names the device, for which libtorch 2.x warns on every call.
pub(crate) fn page_locked(
    host: &tch::Tensor,
    device: tch::Device,
) -> Result<tch::Tensor, ModelError> {
    Ok(host.f_internal_pin_memory(device)?)
}

/// One batch key as a host tensor of its shape, if its values fill the shape: a view of the
/// batch's memory, not a copy (a DataLoader's batch is a torch tensor already; on the CPU this
/// is the whole hand-over, on CUDA the one copy into pinned memory follows).
///
/// # Safety
/// The tensor borrows `t`'s values: it, and every view of it, must be dropped before `t` is
/// dropped or changed, and nothing may write through it. The steps use it within one
/// `step(&batch)` call and only read it.
pub(crate) unsafe fn host_tensor(
    key: &str,
    t: &crate::loader::batch::BatchTensor,
) -> Result<tch::Tensor, ModelError> {
    use crate::loader::batch::BatchData;
    use tch::Kind;
    let n: usize = t.shape.iter().product();
    let (data, len, kind) = match &t.data {
        BatchData::F32(v) => (v.as_ptr() as *const u8, v.len(), Kind::Float),
        BatchData::F64(v) => (v.as_ptr() as *const u8, v.len(), Kind::Double),
        BatchData::I32(v) => (v.as_ptr() as *const u8, v.len(), Kind::Int),
        BatchData::U8(v) => (v.as_ptr(), v.len(), Kind::Uint8),
        BatchData::I64(v) => (v.as_ptr() as *const u8, v.len(), Kind::Int64),
        BatchData::Bool(v) => (v.as_ptr() as *const u8, v.len(), Kind::Bool),
    };
    if len != n {
        return Err(ModelError::Batch(format!(
            "`{key}` holds the wrong number of values for shape {:?}",
            t.shape
        )));
    }
    let shape: Vec<i64> = t.shape.iter().map(|&d| d as i64).collect();
    // SAFETY: `data` points at `n` values of `kind` (a Rust bool is one byte, 0 or 1, as
    // torch's), alive as long as the caller keeps `t`, which the contract above requires.
    let flat = unsafe { tch::Tensor::from_blob(data, &[n as i64], &[1], kind, tch::Device::Cpu) };
    Ok(flat.view(&shape[..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loader::batch::{BatchData, BatchTensor};

    #[test]
    fn host_tensors_view_the_batch_values_in_their_shape_and_kind() {
        let tensor = |data, shape: &[usize]| BatchTensor { shape: shape.to_vec(), data };
        let floats = tensor(BatchData::F32((0..24).map(|x| x as f32).collect()), &[2, 3, 4]);
        // SAFETY: `floats` outlives the view, which is only read.
        let view = unsafe { host_tensor("f", &floats) }.unwrap();
        assert_eq!((view.size(), view.kind()), (vec![2, 3, 4], tch::Kind::Float));
        assert_eq!(view.double_value(&[1, 2, 3]), 23.0, "row-major: 1·12 + 2·4 + 3");
        assert_eq!(view.sum(tch::Kind::Double).double_value(&[]), 276.0);
        let pixels = tensor(BatchData::U8(vec![0, 255, 7, 9]), &[2, 2]);
        let view = unsafe { host_tensor("u", &pixels) }.unwrap();
        assert_eq!((view.kind(), view.int64_value(&[0, 1])), (tch::Kind::Uint8, 255));
        let pads = tensor(BatchData::Bool(vec![false, true, true]), &[3]);
        let view = unsafe { host_tensor("b", &pads) }.unwrap();
        assert_eq!(
            (view.kind(), view.sum(tch::Kind::Int64).int64_value(&[])),
            (tch::Kind::Bool, 2)
        );
        let index = tensor(BatchData::I64(vec![-5, 1 << 40]), &[2]);
        let view = unsafe { host_tensor("i", &index) }.unwrap();
        assert_eq!((view.int64_value(&[0]), view.int64_value(&[1])), (-5, 1 << 40));
        let short = tensor(BatchData::F32(vec![0.0; 5]), &[2, 3]);
        let error = unsafe { host_tensor("state", &short) }.unwrap_err().to_string();
        assert!(error.contains("`state` holds the wrong number of values"), "{error}");
    }
}
