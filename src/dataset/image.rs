//! Image features: PNG or JPEG bytes (a parquet `struct<bytes, path>` cell) decoded into the
//! same form as video frames: RGB, CHW, uint8 or float32 in [0, 1] (`u8 / 255`, as torchvision's
//! `ToTensor` on the PIL image LeRobot builds), native size or resized bilinearly.

use std::io::Cursor;
use std::path::Path;

use image::imageops::FilterType;
use image::ImageReader;

use crate::dataset::error::{DatasetError, Result};
use crate::dataset::video::FrameBuffer;

/// `(height, width)` of an encoded image, read from its header without decoding it. `source`
/// (the file the bytes come from) names the error.
pub fn image_size(source: &Path, bytes: &[u8]) -> Result<(u32, u32)> {
    let (width, height) = ImageReader::new(Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| DatasetError::io(source, e))?
        .into_dimensions()
        .map_err(|e| DatasetError::invalid(source, format!("image feature: {e}")))?;
    Ok((height, width))
}

/// Decodes a PNG or JPEG image into `out`: `3 × height × width` values, RGB, CHW, at
/// `resolution` `(height, width)` (bilinear) or the native size. Alpha is dropped and gray is
/// repeated over the three channels, as PIL's `convert("RGB")`. `source` names errors.
pub fn decode_image_into(
    source: &Path,
    bytes: &[u8],
    resolution: Option<(u32, u32)>,
    mut out: FrameBuffer<'_>,
) -> Result<()> {
    let decoded = image::load_from_memory(bytes)
        .map_err(|e| DatasetError::invalid(source, format!("image feature: {e}")))?
        .into_rgb8();
    let rgb = match resolution {
        Some((height, width)) if (width, height) != decoded.dimensions() => {
            image::imageops::resize(&decoded, width, height, FilterType::Triangle)
        }
        _ => decoded,
    };
    let (width, height) = rgb.dimensions();
    let needed = 3 * width as usize * height as usize;
    if out.len() != needed {
        return Err(DatasetError::invalid(
            source,
            format!(
                "output buffer holds {} values, an image of 3×{height}×{width} needs {needed}",
                out.len()
            ),
        ));
    }
    out.fill_from_rgb(rgb.as_raw());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use image::{ImageFormat, Rgb, RgbImage, Rgba, RgbaImage};

    fn encode(image: &RgbImage, format: ImageFormat) -> Vec<u8> {
        let mut bytes = Vec::new();
        image.write_to(&mut Cursor::new(&mut bytes), format).unwrap();
        bytes
    }

    fn pattern(width: u32, height: u32) -> RgbImage {
        RgbImage::from_fn(width, height, |x, y| Rgb([(x * 7) as u8, (y * 11) as u8, (x + y) as u8]))
    }

    #[test]
    fn png_round_trips_to_chw() {
        let image = pattern(5, 3);
        let bytes = encode(&image, ImageFormat::Png);
        let source = Path::new("frames.parquet");
        assert_eq!(image_size(source, &bytes).unwrap(), (3, 5));
        let mut u8s = vec![0u8; 3 * 3 * 5];
        decode_image_into(source, &bytes, None, FrameBuffer::U8(&mut u8s)).unwrap();
        for (x, y, px) in image.enumerate_pixels() {
            for c in 0..3 {
                assert_eq!(u8s[c * 15 + (y * 5 + x) as usize], px[c]);
            }
        }
        let mut f32s = vec![0f32; 3 * 3 * 5];
        decode_image_into(source, &bytes, None, FrameBuffer::F32(&mut f32s)).unwrap();
        for (f, u) in f32s.iter().zip(&u8s) {
            assert_eq!(*f, f32::from(*u) / 255.0);
        }
    }

    #[test]
    fn rgba_drops_alpha_and_jpeg_decodes() {
        let rgba = RgbaImage::from_pixel(4, 4, Rgba([10, 20, 30, 0]));
        let mut bytes = Vec::new();
        rgba.write_to(&mut Cursor::new(&mut bytes), ImageFormat::Png).unwrap();
        let mut out = vec![0u8; 48];
        decode_image_into(Path::new("x.parquet"), &bytes, None, FrameBuffer::U8(&mut out)).unwrap();
        assert_eq!(&out[..16], &[10; 16]);
        assert_eq!(&out[32..], &[30; 16]);

        let jpeg = encode(&pattern(16, 8), ImageFormat::Jpeg);
        let mut out = vec![0u8; 3 * 8 * 16];
        decode_image_into(Path::new("x.parquet"), &jpeg, None, FrameBuffer::U8(&mut out)).unwrap();
    }

    #[test]
    fn resize_and_errors_name_the_source() {
        let bytes = encode(&pattern(8, 6), ImageFormat::Png);
        let source = Path::new("data/chunk-000/episode_000000.parquet");
        let mut out = vec![0f32; 3 * 3 * 4];
        decode_image_into(source, &bytes, Some((3, 4)), FrameBuffer::F32(&mut out)).unwrap();
        assert!(out.iter().all(|v| (0.0..=1.0).contains(v)));
        let err = decode_image_into(source, &bytes, None, FrameBuffer::F32(&mut out)).unwrap_err();
        assert!(err.to_string().contains("episode_000000.parquet"), "{err}");
        let err = decode_image_into(source, b"not an image", None, FrameBuffer::U8(&mut [0; 3]))
            .unwrap_err();
        assert!(err.to_string().starts_with("data/chunk-000/episode_000000.parquet"), "{err}");
    }
}
