//! A batch's copy to the device on a CUDA stream of its own, while the step before it computes
//! on libtorch's default stream, an event ordering the step after its batch's copy: what tch
//! cannot do (it exposes no streams or events), done with the CUDA runtime's own functions,
//! looked up in the process, where libtorch's CUDA build has loaded them.
//!
//! Two slots of buffers take turns, each a page-locked host buffer and a device buffer per key,
//! kept from batch to batch (a raw copy is not tracked by libtorch's allocators, so its memory
//! must stay put): a batch is written into a free slot's page-locked buffers and copied from
//! there on the side stream; the step's stream waits on the slot's event; when the step is
//! done with the batch, an event on the step's stream hands the slot back, and the side stream
//! waits on it before the slot's device memory is written again.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::OnceLock;

use tch::{Device, Kind, Tensor};

use super::error::ModelError;
use super::host::{host_tensor, page_locked};
use crate::loader::batch::Batch;

/// `cudaStream_t`, `cudaEvent_t`.
type Handle = *mut c_void;
/// The legacy default stream, libtorch's default: its steps' stream.
const STEP_STREAM: Handle = std::ptr::null_mut();
/// `cudaStreamNonBlocking`: no implicit ordering with the default stream.
const NON_BLOCKING: c_uint = 0x1;
/// `cudaEventDisableTiming`.
const NO_TIMING: c_uint = 0x2;
/// `cudaMemcpyHostToDevice`.
const HOST_TO_DEVICE: c_int = 1;

/// The CUDA runtime functions the copy calls (the C API, stable across CUDA versions).
struct Runtime {
    set_device: unsafe extern "C" fn(c_int) -> c_int,
    stream_create: unsafe extern "C" fn(*mut Handle, c_uint) -> c_int,
    stream_destroy: unsafe extern "C" fn(Handle) -> c_int,
    event_create: unsafe extern "C" fn(*mut Handle, c_uint) -> c_int,
    event_destroy: unsafe extern "C" fn(Handle) -> c_int,
    event_record: unsafe extern "C" fn(Handle, Handle) -> c_int,
    event_synchronize: unsafe extern "C" fn(Handle) -> c_int,
    stream_wait_event: unsafe extern "C" fn(Handle, Handle, c_uint) -> c_int,
    stream_synchronize: unsafe extern "C" fn(Handle) -> c_int,
    memcpy_async: unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int, Handle) -> c_int,
    error_string: unsafe extern "C" fn(c_int) -> *const c_char,
}

impl Runtime {
    /// The runtime loaded in this process, if libtorch's CUDA build loaded one.
    fn get() -> Option<&'static Runtime> {
        static RUNTIME: OnceLock<Option<Runtime>> = OnceLock::new();
        // SAFETY: each symbol is the CUDA runtime function of that name, whose C signature
        // is the field's.
        RUNTIME.get_or_init(|| unsafe { Self::find() }).as_ref()
    }

    // Each symbol's type is its field's, written once there.
    #[allow(clippy::missing_transmute_annotations)]
    unsafe fn find() -> Option<Runtime> {
        macro_rules! function {
            ($name:literal) => {{
                let f = libc::dlsym(libc::RTLD_DEFAULT, concat!($name, "\0").as_ptr().cast());
                if f.is_null() {
                    return None;
                }
                std::mem::transmute::<*mut c_void, _>(f)
            }};
        }
        Some(Runtime {
            set_device: function!("cudaSetDevice"),
            stream_create: function!("cudaStreamCreateWithFlags"),
            stream_destroy: function!("cudaStreamDestroy"),
            event_create: function!("cudaEventCreateWithFlags"),
            event_destroy: function!("cudaEventDestroy"),
            event_record: function!("cudaEventRecord"),
            event_synchronize: function!("cudaEventSynchronize"),
            stream_wait_event: function!("cudaStreamWaitEvent"),
            stream_synchronize: function!("cudaStreamSynchronize"),
            memcpy_async: function!("cudaMemcpyAsync"),
            error_string: function!("cudaGetErrorString"),
        })
    }

    /// `code` of `what` as a result.
    fn check(&self, what: &str, code: c_int) -> Result<(), ModelError> {
        if code == 0 {
            return Ok(());
        }
        // SAFETY: the runtime returns a static string for every code.
        let text = unsafe { CStr::from_ptr((self.error_string)(code)) }.to_string_lossy();
        Err(ModelError::Device(format!("{what}: CUDA error {code}: {text}")))
    }

    /// A new event, for ordering only.
    fn event(&self) -> Result<Handle, ModelError> {
        let mut event = std::ptr::null_mut();
        // SAFETY: the runtime writes the new event's handle.
        self.check("cudaEventCreateWithFlags", unsafe {
            (self.event_create)(&mut event, NO_TIMING)
        })?;
        Ok(event)
    }
}

/// Waits for the work enqueued so far on the step's stream (libtorch's default stream) of CUDA
/// device `index`, not for the side stream's copies; false where that could not be done (no
/// CUDA runtime in the process, or the runtime refused), and the caller synchronises the whole
/// device instead.
pub fn synchronize_step_stream(index: usize) -> bool {
    // SAFETY: runtime calls: the thread's device, then its default stream.
    Runtime::get().is_some_and(|rt| unsafe {
        (rt.set_device)(index as c_int) == 0 && (rt.stream_synchronize)(STEP_STREAM) == 0
    })
}

/// A slot's buffers for one key: page-locked on the host, and on the device.
struct Buffers {
    host: Tensor,
    device: Tensor,
}

/// One of the two sets of buffers the batches take turns in.
struct Slot {
    buffers: HashMap<String, Buffers>,
    /// Recorded on the side stream after the slot's copies.
    copied: Handle,
    /// Recorded on the step's stream after the step that read the slot.
    released: Handle,
    runtime: &'static Runtime,
}

impl Drop for Slot {
    /// Frees the slot's buffers only once its last copy is done (a copy still in flight must
    /// not write memory the allocator hands out again), and its events.
    fn drop(&mut self) {
        let rt = self.runtime;
        // SAFETY: runtime calls on the slot's own events, not used after this.
        unsafe {
            let _ = (rt.event_synchronize)(self.copied);
            self.buffers.clear();
            let _ = (rt.event_destroy)(self.copied);
            let _ = (rt.event_destroy)(self.released);
        }
    }
}

// SAFETY: the handles are CUDA runtime objects, usable from any thread; a slot is used by one
// thread at a time (the copier's, then the trainer's), handed over through channels.
unsafe impl Send for Slot {}

/// Copies batches to the device on a stream of its own.
pub struct SideStreamCopier {
    runtime: &'static Runtime,
    device: Device,
    stream: SendHandle,
    free: Receiver<Slot>,
    back: Sender<Slot>,
    /// Whether a batch was read back and compared yet (the first one is).
    checked: bool,
}

/// A runtime handle moved to the copier's thread.
struct SendHandle(Handle);

// SAFETY: CUDA streams may be used from any thread.
unsafe impl Send for SendHandle {}

impl SideStreamCopier {
    /// A copier to `device` (CUDA), with its stream and two slots; an error where the process
    /// has no CUDA runtime or the runtime refuses.
    pub fn new(device: Device) -> Result<Self, ModelError> {
        let Device::Cuda(index) = device else {
            return Err(ModelError::Device(format!("{device:?} is not a CUDA device")));
        };
        let runtime = Runtime::get()
            .ok_or_else(|| ModelError::Device("this libtorch loaded no CUDA runtime".into()))?;
        // SAFETY: plain runtime calls; the stream's handle is written by the runtime.
        let stream = unsafe {
            runtime.check("cudaSetDevice", (runtime.set_device)(index as c_int))?;
            let mut stream = std::ptr::null_mut();
            runtime.check(
                "cudaStreamCreateWithFlags",
                (runtime.stream_create)(&mut stream, NON_BLOCKING),
            )?;
            stream
        };
        let (back, free) = channel();
        for _ in 0..2 {
            let slot = Slot {
                buffers: HashMap::new(),
                copied: runtime.event()?,
                released: runtime.event()?,
                runtime,
            };
            back.send(slot).expect("the receiver is held here");
        }
        Ok(Self { runtime, device, stream: SendHandle(stream), free, back, checked: false })
    }

    /// `batch` on the device: written into a free slot's page-locked buffers and copied from
    /// there on the side stream. Waits for a slot where both are in use.
    pub fn copy(&mut self, batch: &Batch) -> Result<OnDevice, ModelError> {
        let mut slot = self
            .free
            .recv()
            .map_err(|_| ModelError::Device("the side-stream copy lost its buffers".into()))?;
        let tensors = match self.copy_into(&mut slot, batch) {
            Ok(tensors) => tensors,
            Err(err) => {
                // The slot stays the copier's, for the batches after this one.
                let _ = self.back.send(slot);
                return Err(err);
            }
        };
        let on_device =
            OnDevice { tensors, slot: Some(slot), back: self.back.clone(), runtime: self.runtime };
        if !self.checked {
            self.checked = true;
            on_device.compare(batch)?;
        }
        Ok(on_device)
    }

    /// Copies `batch` into `slot` on the side stream; its device tensors by key.
    fn copy_into(
        &self,
        slot: &mut Slot,
        batch: &Batch,
    ) -> Result<HashMap<String, Tensor>, ModelError> {
        let (rt, stream) = (self.runtime, self.stream.0);
        let Device::Cuda(index) = self.device else { unreachable!("made for CUDA only") };
        // SAFETY: runtime calls on this copier's stream and the slot's events; the pointers
        // are those of the slot's contiguous buffers, of the bytes copied, kept alive by the
        // slot until its `copied` event has passed.
        unsafe {
            rt.check("cudaSetDevice", (rt.set_device)(index as c_int))?;
            // The slot's last copy is done before its page-locked memory is written again, and
            // the step that read its device memory before that is written again.
            rt.check("cudaEventSynchronize", (rt.event_synchronize)(slot.copied))?;
            rt.check("cudaStreamWaitEvent", (rt.stream_wait_event)(stream, slot.released, 0))?;
            let mut tensors = HashMap::with_capacity(batch.tensors.len());
            for (key, t) in &batch.tensors {
                // The view is only read, copied into the slot, and dropped in this iteration.
                let view = host_tensor(key, t)?;
                let buffers = self.buffers_for(slot, key, &view)?;
                buffers.host.f_copy_(&view)?;
                let bytes = view.numel() * view.kind().elt_size_in_bytes();
                rt.check(
                    "cudaMemcpyAsync",
                    (rt.memcpy_async)(
                        buffers.device.data_ptr(),
                        buffers.host.data_ptr(),
                        bytes,
                        HOST_TO_DEVICE,
                        stream,
                    ),
                )?;
                tensors.insert(key.clone(), buffers.device.shallow_clone());
            }
            rt.check("cudaEventRecord", (rt.event_record)(slot.copied, stream))?;
            Ok(tensors)
        }
    }

    /// The slot's buffers for `key`, made anew where the batch's tensor has another shape or
    /// kind than the last (the epoch's smaller last batch).
    fn buffers_for<'a>(
        &self,
        slot: &'a mut Slot,
        key: &str,
        like: &Tensor,
    ) -> Result<&'a mut Buffers, ModelError> {
        let (size, kind) = (like.size(), like.kind());
        let fits = |b: &Buffers| b.host.size() == size && b.host.kind() == kind;
        if !slot.buffers.get(key).is_some_and(fits) {
            let host = page_locked(&Tensor::f_empty(&size, (kind, Device::Cpu))?, self.device)?;
            let device = Tensor::f_empty(&size, (kind, self.device))?;
            // The device memory may have been the step stream's until now: the side stream
            // writes it after what that stream was given so far.
            let rt = self.runtime;
            // SAFETY: runtime calls on the slot's event and this copier's stream.
            unsafe {
                rt.check("cudaEventRecord", (rt.event_record)(slot.released, STEP_STREAM))?;
                rt.check(
                    "cudaStreamWaitEvent",
                    (rt.stream_wait_event)(self.stream.0, slot.released, 0),
                )?;
            }
            slot.buffers.insert(key.to_string(), Buffers { host, device });
        }
        Ok(slot.buffers.get_mut(key).expect("inserted above"))
    }
}

impl Drop for SideStreamCopier {
    /// Destroys the stream (the runtime frees it once its work is done).
    fn drop(&mut self) {
        // SAFETY: a runtime call on this copier's own stream, not used after this.
        let _ = unsafe { (self.runtime.stream_destroy)(self.stream.0) };
    }
}

/// A batch copied to the device on the side stream: its device tensors by key. Dropped after
/// the step, it hands its slot back for a later batch.
pub struct OnDevice {
    tensors: HashMap<String, Tensor>,
    slot: Option<Slot>,
    back: Sender<Slot>,
    runtime: &'static Runtime,
}

impl OnDevice {
    /// `key`'s tensor on the device.
    pub fn get(&self, key: &str) -> Option<&Tensor> {
        self.tensors.get(key)
    }

    /// Has the step's stream wait for the batch's copy: what is enqueued on it from here on
    /// runs after the copy.
    pub fn order_step_after_copy(&self) -> Result<(), ModelError> {
        let (rt, slot) = (self.runtime, self.slot.as_ref().expect("held until dropped"));
        // SAFETY: a runtime call on the default stream and the slot's event.
        rt.check("cudaStreamWaitEvent", unsafe {
            (rt.stream_wait_event)(STEP_STREAM, slot.copied, 0)
        })
    }

    /// Reads the copy back and compares it with `batch`, byte for byte: a side-stream copy
    /// that gave other values is an error, not a silent difference in training.
    fn compare(&self, batch: &Batch) -> Result<(), ModelError> {
        self.order_step_after_copy()?;
        for (key, t) in &batch.tensors {
            // SAFETY: the view is only read, within this iteration.
            let view = unsafe { host_tensor(key, t)? };
            let back = self.tensors[key].f_to_device(Device::Cpu)?;
            let bytes = |t: &Tensor| t.f_view_dtype(Kind::Uint8);
            if !bytes(&view)?.f_equal(&bytes(&back)?)? {
                return Err(ModelError::Device(format!(
                    "`{key}` copied to the device on the side stream differs from the batch"
                )));
            }
        }
        Ok(())
    }
}

impl Drop for OnDevice {
    fn drop(&mut self) {
        let slot = self.slot.take().expect("dropped once");
        drop(std::mem::take(&mut self.tensors));
        // The step's work on the batch was enqueued before this: the slot's device memory is
        // written again only after it. (Where recording fails the runtime is broken, and the
        // copier's next call says so.)
        // SAFETY: a runtime call on the slot's event and the default stream.
        let _ = unsafe { (self.runtime.event_record)(slot.released, STEP_STREAM) };
        let _ = self.back.send(slot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_usable_gpu_the_copier_is_an_error_naming_why() {
        if tch::Cuda::is_available() {
            eprintln!("a GPU is here: the copier's refusal is not tested");
            return;
        }
        let Err(err) = SideStreamCopier::new(Device::Cuda(0)) else {
            panic!("no GPU, yet a side-stream copier")
        };
        let text = err.to_string();
        assert!(
            text.contains("CUDA error") || text.contains("no CUDA runtime"),
            "the runtime's refusal, or its absence: {text}"
        );
        let Err(err) = SideStreamCopier::new(Device::Cpu) else { panic!("a CPU copier") };
        assert!(err.to_string().contains("not a CUDA device"), "{err}");
    }
}
