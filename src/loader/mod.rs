//! The loader pipeline: samplers, workers and batches.

pub mod batch;
pub mod pipeline;
pub mod sampler;

/// Parses the resolution knob `HxW` (e.g. `96x96`, `480x640`) into `(height, width)`.
pub fn parse_resolution(text: &str) -> Result<(u32, u32), String> {
    let parse = |s: &str| s.trim().parse::<u32>().ok().filter(|&v| v > 0);
    text.split_once(['x', 'X', '×'])
        .and_then(|(h, w)| Some((parse(h)?, parse(w)?)))
        .ok_or_else(|| format!("{text:?}: expected HxW, e.g. 96x96"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_resolutions() {
        assert_eq!(super::parse_resolution("96x128"), Ok((96, 128)));
        assert_eq!(super::parse_resolution("480×640"), Ok((480, 640)));
        assert!(super::parse_resolution("96").is_err());
        assert!(super::parse_resolution("0x96").is_err());
    }
}
