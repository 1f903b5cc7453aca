//! Packed RGB24 ↔ the three planes of a CHW frame: the split after swscale (uint8, or float32
//! `v / 255` as LeRobot's `frames.type(torch.float32) / 255`), and the packing back for
//! encoders and PNG files.
//!
//! The split runs once per frame written, over 0.9 M values at 640×480. With AVX2 and FMA it
//! deinterleaves 16 pixels at a time with byte shuffles; float32 is a multiplication by 1/255
//! and one FMA correction step, which equals the division for every byte value (tested for all
//! 256; the division itself held the loop to its throughput). Frames of 512 KiB or more go out
//! with non-temporal stores: a batch of them is far larger than the caches and is read by the
//! consumer only batches later, so writing around the cache spares the read of each destination
//! line and leaves the decoder's working set where it was. On G1 frames (`cargo bench --bench
//! convert`) the split takes 88 µs a 640×480 float32 frame against 127 µs for the
//! auto-vectorised loop it replaced, 23 against 31 µs as uint8.

use std::ops::Range;

/// Whether the split takes its vector path where the CPU has one: in optimised builds.
/// Unoptimised builds (the tests') run the value-by-value loop, there 4× faster than the
/// vector one, whose intrinsics stay calls; the tests compare both paths value for value.
const VECTOR: bool = !cfg!(debug_assertions);

/// Splits packed RGB (`rgb.len() == out.len()`) into the three planes of `out`, as is.
pub(crate) fn split_u8(rgb: &[u8], out: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    if VECTOR && x86::usable() {
        // SAFETY: the CPU has AVX2 and FMA (checked just above).
        return unsafe { x86::split_u8(rgb, out) };
    }
    split_portable(rgb, out, 0..rgb.len() / 3, |v| v)
}

/// Splits packed RGB (`rgb.len() == out.len()`) into the three planes of `out`, each value
/// `v / 255` as float32.
pub(crate) fn split_f32(rgb: &[u8], out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if VECTOR && x86::usable() {
        // SAFETY: the CPU has AVX2 and FMA (checked just above).
        return unsafe { x86::split_f32(rgb, out) };
    }
    split_portable(rgb, out, 0..rgb.len() / 3, to_f32)
}

/// `v / 255` as float32: a division, as LeRobot's.
fn to_f32(v: u8) -> f32 {
    f32::from(v) / 255.0
}

/// The split of pixels `pixels` of a frame, one value at a time.
fn split_portable<T>(rgb: &[u8], out: &mut [T], pixels: Range<usize>, map: impl Fn(u8) -> T) {
    let plane = rgb.len() / 3;
    let (r, rest) = out.split_at_mut(plane);
    let (g, b) = rest.split_at_mut(plane);
    // Equal lengths, stated so that the loop has no bounds checks and vectorises.
    let (r, g, b, rgb) = (&mut r[..plane], &mut g[..plane], &mut b[..plane], &rgb[..3 * plane]);
    for i in pixels {
        r[i] = map(rgb[3 * i]);
        g[i] = map(rgb[3 * i + 1]);
        b[i] = map(rgb[3 * i + 2]);
    }
}

/// RGB planes (`3 × height × width`, as a uint8 frame holds them) back to packed RGB24 in
/// `rgb` (of the same length): what encoders and PNG files take.
pub fn pack_planes(chw: &[u8], rgb: &mut [u8]) {
    let plane = chw.len() / 3;
    for (p, pixel) in rgb.chunks_exact_mut(3).enumerate() {
        pixel.copy_from_slice(&[chw[p], chw[plane + p], chw[2 * plane + p]]);
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{split_portable, to_f32};

    /// Pixels per step: 48 bytes of packed RGB, 16 values of each plane.
    const STEP: usize = 16;

    /// Frames of at least this many bytes are written around the cache; a batch of smaller
    /// ones may stay in it for the consumer (streamed, 96×128 frames split 1.3× slower).
    const STREAM_FROM_BYTES: usize = 512 << 10;

    /// Whether the vector split can run here.
    pub(super) fn usable() -> bool {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
    }

    /// The byte shuffle that picks, from 16-byte `chunk` of 48 packed bytes, the values of
    /// `channel` that lie in it, each at its place among the step's 16 (-1 elsewhere: zero).
    const fn shuffle(channel: usize, chunk: usize) -> [i8; 16] {
        let mut mask = [-1i8; 16];
        let mut pixel = 0;
        while pixel < STEP {
            let byte = 3 * pixel + channel;
            if byte / 16 == chunk {
                mask[pixel] = (byte % 16) as i8;
            }
            pixel += 1;
        }
        mask
    }

    /// [`shuffle`] for each channel and chunk.
    const SHUFFLES: [[[i8; 16]; 3]; 3] = {
        let mut all = [[[0i8; 16]; 3]; 3];
        let mut channel = 0;
        while channel < 3 {
            let mut chunk = 0;
            while chunk < 3 {
                all[channel][chunk] = shuffle(channel, chunk);
                chunk += 1;
            }
            channel += 1;
        }
        all
    };

    /// The 16 pixels at `rgb` (48 bytes) as three vectors of 16 bytes: R, G, B.
    #[target_feature(enable = "avx2")]
    unsafe fn deinterleave(rgb: *const u8) -> [__m128i; 3] {
        let chunks = [0, 16, 32].map(|at| _mm_loadu_si128(rgb.add(at).cast()));
        SHUFFLES.map(|masks| {
            let part =
                |k: usize| _mm_shuffle_epi8(chunks[k], _mm_loadu_si128(masks[k].as_ptr().cast()));
            _mm_or_si128(_mm_or_si128(part(0), part(1)), part(2))
        })
    }

    /// Pixels `0..head` one at a time, where `head` brings the first plane to `align` bytes
    /// (or the whole frame, if shorter); then whether the other two planes are aligned there
    /// too, for the non-temporal stores.
    fn head<T>(rgb: &[u8], out: &mut [T], align: usize, map: impl Fn(u8) -> T) -> (usize, bool) {
        let plane = rgb.len() / 3;
        let head = out.as_ptr().align_offset(align).min(plane);
        split_portable(rgb, out, 0..head, map);
        let bytes = std::mem::size_of::<T>() * plane;
        (head, bytes.is_multiple_of(align) && 3 * bytes >= STREAM_FROM_BYTES)
    }

    /// [`super::split_u8`] with AVX2.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn split_u8(rgb: &[u8], out: &mut [u8]) {
        let plane = rgb.len() / 3;
        assert_eq!(out.len(), 3 * plane, "one value per byte");
        let (start, stream) = head(rgb, out, 16, |v| v);
        let end = start + (plane - start) / STEP * STEP;
        let base = out.as_mut_ptr();
        // Each step reads the 48 bytes at 3i and writes 16 values at p × plane + i (p < 3):
        // i + 16 ≤ end ≤ plane keeps both within `rgb` and `out` (its length checked above).
        for i in (start..end).step_by(STEP) {
            let planes = deinterleave(rgb.as_ptr().add(3 * i));
            for (p, values) in planes.into_iter().enumerate() {
                let to = base.add(p * plane + i).cast();
                if stream {
                    _mm_stream_si128(to, values);
                } else {
                    _mm_storeu_si128(to, values);
                }
            }
        }
        _mm_sfence();
        split_portable(rgb, out, end..plane, |v| v);
    }

    /// [`super::split_f32`] with AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn split_f32(rgb: &[u8], out: &mut [f32]) {
        let plane = rgb.len() / 3;
        assert_eq!(out.len(), 3 * plane, "one value per byte");
        let (start, stream) = head(rgb, out, 32, to_f32);
        let end = start + (plane - start) / STEP * STEP;
        let base = out.as_mut_ptr();
        let (inverse, divisor) = (_mm256_set1_ps(1.0 / 255.0), _mm256_set1_ps(255.0));
        // v / 255 correctly rounded: q = v × (1/255), then q + (v − 255q) × (1/255), the
        // residual exact through the FMA.
        let divide = |bytes: __m128i| {
            let v = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
            let q = _mm256_mul_ps(v, inverse);
            _mm256_fmadd_ps(_mm256_fnmadd_ps(q, divisor, v), inverse, q)
        };
        // As in `split_u8`: every read and write lies within `rgb` and `out`.
        for i in (start..end).step_by(STEP) {
            let planes = deinterleave(rgb.as_ptr().add(3 * i));
            for (p, values) in planes.into_iter().enumerate() {
                let to = base.add(p * plane + i);
                let halves = [divide(values), divide(_mm_srli_si128::<8>(values))];
                for (h, half) in halves.into_iter().enumerate() {
                    if stream {
                        _mm256_stream_ps(to.add(8 * h), half);
                    } else {
                        _mm256_storeu_ps(to.add(8 * h), half);
                    }
                }
            }
        }
        _mm_sfence();
        split_portable(rgb, out, end..plane, to_f32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rgb_is_split_into_planes() {
        let rgb = [1u8, 2, 3, 4, 5, 6];
        let mut u8s = [0u8; 6];
        split_u8(&rgb, &mut u8s);
        assert_eq!(u8s, [1, 4, 2, 5, 3, 6]);
        let mut f32s = [0f32; 6];
        split_f32(&rgb, &mut f32s);
        assert_eq!(
            f32s,
            [1.0 / 255.0, 4.0 / 255.0, 2.0 / 255.0, 5.0 / 255.0, 3.0 / 255.0, 6.0 / 255.0]
        );
    }

    /// Pixels of every byte value in every channel, twice (so that each value also reaches the
    /// vector loop past any head), then pseudo-random ones.
    fn pixels(count: usize) -> Vec<u8> {
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        (0..3 * count)
            .map(|i| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                if i < 3 * 512 {
                    (i / 3 % 256) as u8
                } else {
                    state as u8
                }
            })
            .collect()
    }

    /// The vector splits (where the CPU has them), each into `out` at `offset`.
    fn vector_splits(rgb: &[u8], offset: usize) -> Option<(Vec<f32>, Vec<u8>)> {
        #[cfg(target_arch = "x86_64")]
        if x86::usable() {
            let mut f32s = vec![f32::NAN; offset + rgb.len()];
            let mut u8s = vec![0u8; offset + rgb.len()];
            // SAFETY: the CPU has AVX2 and FMA (checked just above).
            unsafe {
                x86::split_f32(rgb, &mut f32s[offset..]);
                x86::split_u8(rgb, &mut u8s[offset..]);
            }
            return Some((f32s.split_off(offset), u8s.split_off(offset)));
        }
        None
    }

    #[test]
    fn the_vector_split_equals_the_value_by_value_one_at_any_alignment_and_length() {
        // Lengths around the 16-pixel step and the heads, at each offset into the buffer that
        // puts the first plane off its alignment; the values of every byte in every channel.
        // 640×480 frames are written around the cache (their planes' alignments agree); one
        // pixel more, and they are not.
        for count in [1, 15, 16, 17, 31, 33, 256, 1001, 640 * 3 + 7, 640 * 480, 640 * 480 + 1] {
            let rgb = pixels(count);
            let (mut want_f32, mut want_u8) = (vec![0f32; rgb.len()], vec![0u8; rgb.len()]);
            split_portable(&rgb, &mut want_f32, 0..count, to_f32);
            split_portable(&rgb, &mut want_u8, 0..count, |v| v);
            for offset in 0..9 {
                let Some((f32s, u8s)) = vector_splits(&rgb, offset) else {
                    eprintln!("no AVX2 and FMA here: the vector split is not tested");
                    return;
                };
                assert_eq!(u8s, want_u8, "{count} pixels at +{offset}");
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&f32s), bits(&want_f32), "{count} pixels at +{offset}");
            }
        }
    }

    #[test]
    fn float_values_are_divisions_by_255() {
        // Every byte value in each channel, through the vector loop where there is one.
        let rgb = pixels(1001);
        let mut f32s = vec![0f32; rgb.len()];
        split_f32(&rgb, &mut f32s);
        let vector = vector_splits(&rgb, 0).map(|(f32s, _)| f32s);
        for values in [Some(f32s), vector].into_iter().flatten() {
            for (i, px) in rgb.chunks_exact(3).enumerate() {
                for channel in 0..3 {
                    let value = values[channel * 1001 + i];
                    assert_eq!(value.to_bits(), (px[channel] as f32 / 255f32).to_bits(), "{px:?}");
                }
            }
            assert!(values.contains(&0.0) && values.contains(&1.0));
        }
    }

    #[test]
    fn planes_pack_back_to_the_rgb_they_came_from() {
        let rgb = pixels(77);
        let mut chw = vec![0u8; rgb.len()];
        split_u8(&rgb, &mut chw);
        let mut packed = vec![0u8; rgb.len()];
        pack_planes(&chw, &mut packed);
        assert_eq!(packed, rgb);
    }
}
