//! Decoded frame → RGB, CHW, uint8 or float32 in [0, 1], native size or resized.
//!
//! Pixels equal LeRobot's torchcodec CPU path: swscale converts to packed `RGB24` with
//! `SWS_BILINEAR`, the YUV→RGB matrix from the frame's colorspace (`sws_getCoefficients`, BT.601
//! when unspecified) and swscale's default ranges for the pixel format (the frame's
//! `color_range` is not consulted, as in torchcodec). The packed rows are then split into the
//! three planes of the caller's CHW buffer; float32 is `u8 / 255` as LeRobot's
//! `frames.type(torch.float32) / 255`. Writing planar `GBRP` straight from swscale would skip the
//! split but goes through swscale's other (full-chroma) output path, whose pixels differ.

use std::os::raw::c_int;
use std::path::Path;
use std::ptr::{self, NonNull};

use ffmpeg_next::ffi;
use ffmpeg_next::frame;
use ffmpeg_next::software::scaling::Flags;

use super::planes;
use crate::dataset::error::{DatasetError, Result};

/// Where the values of one or more frames go: `frames × 3 × height × width`, CHW, RGB.
#[derive(Debug)]
pub enum FrameBuffer<'a> {
    /// uint8 values, 0..=255.
    U8(&'a mut [u8]),
    /// float32 values in [0, 1]: the uint8 value / 255.
    F32(&'a mut [f32]),
}

impl FrameBuffer<'_> {
    /// Number of values the buffer holds.
    pub fn len(&self) -> usize {
        match self {
            FrameBuffer::U8(b) => b.len(),
            FrameBuffer::F32(b) => b.len(),
        }
    }

    /// Whether the buffer holds no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `index`-th block of `values` values.
    pub(crate) fn frame(&mut self, index: usize, values: usize) -> FrameBuffer<'_> {
        let range = index * values..(index + 1) * values;
        match self {
            FrameBuffer::U8(b) => FrameBuffer::U8(&mut b[range]),
            FrameBuffer::F32(b) => FrameBuffer::F32(&mut b[range]),
        }
    }

    /// Copies block `from` onto block `to` (blocks of `values` values).
    pub(crate) fn copy_frame(&mut self, from: usize, to: usize, values: usize) {
        match self {
            FrameBuffer::U8(b) => b.copy_within(from * values..(from + 1) * values, to * values),
            FrameBuffer::F32(b) => b.copy_within(from * values..(from + 1) * values, to * values),
        }
    }

    /// Writes one CHW frame from packed RGB24 (`rgb.len() == self.len()`): the bytes as they
    /// are, or float32 `v / 255` as LeRobot's `frames.type(torch.float32) / 255`.
    pub fn fill_from_rgb(&mut self, rgb: &[u8]) {
        match self {
            FrameBuffer::U8(out) => planes::split_u8(rgb, out),
            FrameBuffer::F32(out) => planes::split_f32(rgb, out),
        }
    }
}

/// What a swscale context was made for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ScaleKey {
    src_width: u32,
    src_height: u32,
    src_format: ffi::AVPixelFormat,
    colorspace: c_int,
    dst_width: u32,
    dst_height: u32,
}

/// An owned swscale context.
struct Scaler {
    context: NonNull<ffi::SwsContext>,
    key: ScaleKey,
}

// SAFETY: the context is owned exclusively by this value and swscale keeps no thread-local
// state: moving it to another thread is sound (it is never shared).
unsafe impl Send for Scaler {}

impl Scaler {
    /// A context as torchcodec makes it: `RGB24`, `SWS_BILINEAR`, the colorspace's matrix.
    fn new(path: &Path, key: ScaleKey) -> Result<Self> {
        let failed = |what: &str| DatasetError::invalid(path, format!("swscale: {what}"));
        // SAFETY: plain FFI calls with valid sizes and formats; a null result is checked.
        let context = unsafe {
            ffi::sws_getContext(
                key.src_width as c_int,
                key.src_height as c_int,
                key.src_format,
                key.dst_width as c_int,
                key.dst_height as c_int,
                ffi::AVPixelFormat::AV_PIX_FMT_RGB24,
                Flags::BILINEAR.bits(),
                ptr::null_mut(),
                ptr::null_mut(),
                ptr::null(),
            )
        };
        let context = NonNull::new(context)
            .ok_or_else(|| failed(&format!("cannot convert {:?} to RGB24", key.src_format)))?;
        let scaler = Self { context, key };
        // SAFETY: `context` is a live context; the out-pointers point to locals; the table
        // from `sws_getCoefficients` is a static one, valid for any colorspace value.
        let ok = unsafe {
            let (mut inv_table, mut table) = (ptr::null_mut(), ptr::null_mut());
            let (mut src_range, mut dst_range) = (0, 0);
            let (mut brightness, mut contrast, mut saturation) = (0, 0, 0);
            let got = ffi::sws_getColorspaceDetails(
                scaler.context.as_ptr(),
                &mut inv_table,
                &mut src_range,
                &mut table,
                &mut dst_range,
                &mut brightness,
                &mut contrast,
                &mut saturation,
            );
            let coefficients = ffi::sws_getCoefficients(key.colorspace);
            got >= 0
                && ffi::sws_setColorspaceDetails(
                    scaler.context.as_ptr(),
                    coefficients,
                    src_range,
                    coefficients,
                    dst_range,
                    brightness,
                    contrast,
                    saturation,
                ) >= 0
        };
        if ok {
            Ok(scaler)
        } else {
            Err(failed("cannot set the colorspace details"))
        }
    }
}

impl Drop for Scaler {
    fn drop(&mut self) {
        // SAFETY: the context was made by `sws_getContext` and is freed once, here.
        unsafe { ffi::sws_freeContext(self.context.as_ptr()) }
    }
}

/// Converts decoded frames into caller buffers; keeps its swscale context and scratch rows.
#[derive(Default)]
pub(crate) struct Converter {
    scaler: Option<Scaler>,
    rgb: Vec<u8>,
}

impl Converter {
    /// Converts `frame` to packed RGB24 at `(height, width)` (swscale); the rows it returns
    /// are then split into a [`FrameBuffer`] by [`FrameBuffer::fill_from_rgb`].
    pub(crate) fn rgb(
        &mut self,
        path: &Path,
        frame: &frame::Video,
        (height, width): (u32, u32),
    ) -> Result<&[u8]> {
        let key = ScaleKey {
            src_width: frame.width(),
            src_height: frame.height(),
            src_format: frame.format().into(),
            colorspace: ffi::AVColorSpace::from(frame.color_space()) as c_int,
            dst_width: width,
            dst_height: height,
        };
        if self.scaler.as_ref().is_none_or(|s| s.key != key) {
            self.scaler = None;
            self.scaler = Some(Scaler::new(path, key)?);
        }
        let scaler = self.scaler.as_mut().expect("made above");
        let row = 3 * width as usize;
        self.rgb.resize(row * height as usize, 0);
        let dst_data = [self.rgb.as_mut_ptr(), ptr::null_mut(), ptr::null_mut(), ptr::null_mut()];
        let dst_linesize = [row as c_int, 0, 0, 0];
        // SAFETY: the context was made for this frame's size and format (checked by `key`); the
        // source planes and strides are the decoded frame's own; the destination holds
        // `height` rows of `row` bytes, which is what an RGB24 output of that size writes.
        let rows = unsafe {
            let src = frame.as_ptr();
            ffi::sws_scale(
                scaler.context.as_ptr(),
                (*src).data.as_ptr() as *const *const u8,
                (*src).linesize.as_ptr(),
                0,
                key.src_height as c_int,
                dst_data.as_ptr(),
                dst_linesize.as_ptr(),
            )
        };
        if rows != height as c_int {
            return Err(DatasetError::invalid(
                path,
                format!("swscale wrote {rows} rows of RGB, expected {height}"),
            ));
        }
        Ok(&self.rgb)
    }
}
