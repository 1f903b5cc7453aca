//! The choices a user makes of a dataset before reading it: which episodes, which window, and
//! the size camera frames are decoded at. Each has one text form, read by the command line,
//! the TOML configs and the results files alike.

use std::fmt;
use std::str::FromStr;

use super::window::WindowSpec;

/// Episodes to read, as `1,2,4` or `0-9,20` (inclusive ranges) spell them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpisodeList {
    episodes: Vec<usize>,
    text: String,
}

impl EpisodeList {
    /// The episode indices, in the order given.
    pub fn indices(&self) -> &[usize] {
        &self.episodes
    }
}

impl FromStr for EpisodeList {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let mut episodes = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let number = |s: &str| {
                s.trim().parse::<usize>().map_err(|e| format!("episode list {text:?}: {s:?}: {e}"))
            };
            match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (number(a)?, number(b)?);
                    if b < a {
                        return Err(format!("episode list {text:?}: empty range {part}"));
                    }
                    episodes.extend(a..=b);
                }
                None => episodes.push(number(part)?),
            }
        }
        if episodes.is_empty() {
            return Err(format!(
                "episode list {text:?}: expected episode indices like 1,2,4 or 0-9"
            ));
        }
        Ok(Self { episodes, text: text.to_string() })
    }
}

impl fmt::Display for EpisodeList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

serde_as_text!(EpisodeList);

/// The sample window by name: LeRobot's recipes that need no more than a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WindowChoice {
    /// Every key is the row's own value.
    None,
    /// Diffusion policy: observations at offsets [-1, 0], action at [-1 … 14].
    Diffusion,
}

named_values!(WindowChoice { None => "none", Diffusion => "diffusion" });

impl WindowChoice {
    /// The window it names, before it is checked against a dataset.
    pub fn spec(self) -> WindowSpec {
        match self {
            WindowChoice::None => WindowSpec::Single,
            WindowChoice::Diffusion => WindowSpec::diffusion(),
        }
    }
}

/// The size camera frames are decoded at: as the files hold them, or resized (bilinear).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Resolution {
    /// As the video files (or images) hold them.
    #[default]
    Native,
    /// Resized to `height × width`, written `HxW` (e.g. `96x128`).
    Size {
        /// Rows.
        height: u32,
        /// Columns.
        width: u32,
    },
}

impl Resolution {
    /// `(height, width)` to resize to; None at native size.
    pub fn size(self) -> Option<(u32, u32)> {
        match self {
            Resolution::Native => None,
            Resolution::Size { height, width } => Some((height, width)),
        }
    }
}

impl FromStr for Resolution {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        if text == "native" {
            return Ok(Resolution::Native);
        }
        let parse = |s: &str| s.trim().parse::<u32>().ok().filter(|&v| v > 0);
        text.split_once(['x', 'X', '×'])
            .and_then(|(h, w)| Some(Resolution::Size { height: parse(h)?, width: parse(w)? }))
            .ok_or_else(|| format!("{text:?}: expected HxW, e.g. 96x96, or native"))
    }
}

impl fmt::Display for Resolution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Resolution::Native => f.write_str("native"),
            Resolution::Size { height, width } => write!(f, "{height}x{width}"),
        }
    }
}

serde_as_text!(Resolution);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_episode_lists_and_keeps_their_text() {
        let list: EpisodeList = "1,2,4-6".parse().unwrap();
        assert_eq!(list.indices(), [1, 2, 4, 5, 6]);
        assert_eq!(list.to_string(), "1,2,4-6");
        assert!("6-4".parse::<EpisodeList>().is_err());
        assert!("x".parse::<EpisodeList>().is_err());
        assert!(",".parse::<EpisodeList>().unwrap_err().contains("expected episode indices"));
    }

    #[test]
    fn parses_resolutions() {
        let size = |height, width| Resolution::Size { height, width };
        assert_eq!("96x128".parse(), Ok(size(96, 128)));
        assert_eq!("480×640".parse(), Ok(size(480, 640)));
        assert_eq!("native".parse(), Ok(Resolution::Native));
        assert_eq!(size(96, 128).to_string(), "96x128");
        assert!("96".parse::<Resolution>().is_err());
        assert!("0x96".parse::<Resolution>().is_err());
    }

    #[test]
    fn window_names_round_trip_and_unknown_ones_are_listed() {
        for &w in WindowChoice::ALL {
            assert_eq!(w.name().parse::<WindowChoice>(), Ok(w));
        }
        let bad = "difusion".parse::<WindowChoice>().unwrap_err();
        assert!(bad.contains("expected none, diffusion"), "{bad}");
    }
}
