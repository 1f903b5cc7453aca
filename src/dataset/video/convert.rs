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

use crate::dataset::{DatasetError, Result};

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

    /// Writes one CHW frame from packed RGB (`rgb.len() == self.len()`).
    pub(crate) fn fill_from_rgb(&mut self, rgb: &[u8]) {
        match self {
            FrameBuffer::U8(out) => split_planes(rgb, out, |v| v),
            // `v / 255` as float32: a division, as LeRobot's `frames.type(torch.float32) / 255`.
            FrameBuffer::F32(out) => split_planes(rgb, out, |v| f32::from(v) / 255.0),
        }
    }
}

/// RGB planes (`3 × height × width`, as [`FrameBuffer::U8`] holds a frame) back to packed
/// RGB24 in `rgb` (of the same length): what encoders and PNG files take.
pub fn pack_planes(chw: &[u8], rgb: &mut [u8]) {
    let plane = chw.len() / 3;
    for (p, pixel) in rgb.chunks_exact_mut(3).enumerate() {
        pixel.copy_from_slice(&[chw[p], chw[plane + p], chw[2 * plane + p]]);
    }
}

/// Splits packed RGB into the three planes of `out`, each value mapped by `map`. With AVX2 the
/// same loop is compiled for it (about 4× faster on float32: eight divisions at a time, same
/// results); this runs once per frame, over 0.9 M values at 640×480.
fn split_planes<T>(rgb: &[u8], out: &mut [T], map: impl Fn(u8) -> T) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2 (checked just above).
        return unsafe { split_planes_avx2(rgb, out, map) };
    }
    split_planes_portable(rgb, out, map)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn split_planes_avx2<T>(rgb: &[u8], out: &mut [T], map: impl Fn(u8) -> T) {
    split_planes_portable(rgb, out, map)
}

#[inline(always)]
fn split_planes_portable<T>(rgb: &[u8], out: &mut [T], map: impl Fn(u8) -> T) {
    let plane = rgb.len() / 3;
    let (r, rest) = out.split_at_mut(plane);
    let (g, b) = rest.split_at_mut(plane);
    // Equal lengths, stated so that the loop has no bounds checks and vectorises.
    let (r, g, b, rgb) = (&mut r[..plane], &mut g[..plane], &mut b[..plane], &rgb[..3 * plane]);
    for i in 0..plane {
        r[i] = map(rgb[3 * i]);
        g[i] = map(rgb[3 * i + 1]);
        b[i] = map(rgb[3 * i + 2]);
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
    /// Converts `frame` to RGB at `(height, width)` and writes it, CHW, into `out` (which holds
    /// exactly `3 × height × width` values).
    pub(crate) fn convert(
        &mut self,
        path: &Path,
        frame: &frame::Video,
        (height, width): (u32, u32),
        out: &mut FrameBuffer<'_>,
    ) -> Result<()> {
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
        out.fill_from_rgb(&self.rgb);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rgb_is_split_into_planes() {
        let rgb = [1u8, 2, 3, 4, 5, 6];
        let mut u8s = [0u8; 6];
        FrameBuffer::U8(&mut u8s).fill_from_rgb(&rgb);
        assert_eq!(u8s, [1, 4, 2, 5, 3, 6]);
        let mut f32s = [0f32; 6];
        FrameBuffer::F32(&mut f32s).fill_from_rgb(&rgb);
        assert_eq!(
            f32s,
            [1.0 / 255.0, 4.0 / 255.0, 2.0 / 255.0, 5.0 / 255.0, 3.0 / 255.0, 6.0 / 255.0]
        );
    }

    #[test]
    fn float_values_are_divisions_by_255() {
        // Every byte value, at a length that exercises the vector loop and its tail.
        let rgb: Vec<u8> = (0..=255u8).cycle().take(3 * 1001).collect();
        let mut f32s = vec![0f32; rgb.len()];
        FrameBuffer::F32(&mut f32s).fill_from_rgb(&rgb);
        for (i, px) in rgb.chunks_exact(3).enumerate() {
            for channel in 0..3 {
                let value = f32s[channel * 1001 + i];
                assert_eq!(value.to_bits(), (px[channel] as f32 / 255f32).to_bits(), "{px:?}");
            }
        }
        assert!(f32s.contains(&0.0) && f32s.contains(&1.0));
    }
}
