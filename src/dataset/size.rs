//! Sizes in bytes as users write them (`8GiB`, `500MB`): tune's memory budget, the frame cache's
//! (`--cache`, a sweep's `loader.cache`, a guard cell's `cache`, the reader's `cache_bytes`). On
//! the dataset's floor, beside [`super::bytes`] (sizes printed), for every module above.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A number of bytes, written `8GiB`, `8GB`, `500MiB`, `123456` (bytes) and so on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteSize(pub u64);

impl FromStr for ByteSize {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let bad = || format!("{text:?}: expected a size such as 8GiB, 500MB or 1.5GB");
        let t = text.trim();
        let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
        let (number, unit) = t.split_at(split);
        let number: f64 = number.parse().map_err(|_| bad())?;
        let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1.0,
            "k" | "kb" => 1e3,
            "m" | "mb" => 1e6,
            "g" | "gb" => 1e9,
            "t" | "tb" => 1e12,
            "kib" => 1024.0,
            "mib" => 1024.0 * 1024.0,
            "gib" => 1024.0 * 1024.0 * 1024.0,
            "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
            _ => return Err(bad()),
        };
        let bytes = number * scale;
        if !bytes.is_finite() || bytes < 1.0 || bytes > u64::MAX as f64 {
            return Err(bad());
        }
        Ok(Self(bytes as u64))
    }
}

impl ByteSize {
    /// `bytes` as short text that reads back to them: `0`, `4GiB`, `512MiB`, `1.5GB`, else bytes.
    pub fn compact(bytes: u64) -> String {
        // Binary units for whole multiples; decimal ones to a tenth.
        const BINARY: [(u64, &str); 3] = [(1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB")];
        const DECIMAL: [(u64, &str); 3] =
            [(1_000_000_000_000, "TB"), (1_000_000_000, "GB"), (1_000_000, "MB")];
        if bytes == 0 {
            return "0".into();
        }
        if let Some((unit, name)) = BINARY.iter().find(|&&(unit, _)| bytes.is_multiple_of(unit)) {
            return format!("{}{name}", bytes / unit);
        }
        match DECIMAL.iter().find(|&&(unit, _)| bytes >= unit && bytes.is_multiple_of(unit / 10)) {
            Some(&(unit, name)) => format!("{}{name}", bytes as f64 / unit as f64),
            None => bytes.to_string(),
        }
    }
}

/// The frame cache's budget as configs give it: `"4GiB"` (any size), or `"0"` / `"none"` for no
/// cache; written back in [`ByteSize::compact`] form.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CacheSize(pub u64);

impl FromStr for CacheSize {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text.trim() {
            "0" | "none" => Ok(Self(0)),
            size => size.parse::<ByteSize>().map(|b| Self(b.0)).map_err(|_| {
                format!("{text:?}: expected a size such as 4GiB or 500MB, or 0 (none)")
            }),
        }
    }
}

impl fmt::Display for CacheSize {
    /// Its compact form, `0` for none.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&ByteSize::compact(self.0))
    }
}

impl Serialize for CacheSize {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&ByteSize::compact(self.0))
    }
}

impl<'de> Deserialize<'de> for CacheSize {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Given {
            Bytes(u64),
            Text(String),
        }
        match Given::deserialize(deserializer)? {
            Given::Bytes(bytes) => Ok(Self(bytes)),
            Given::Text(text) => text.parse().map_err(serde::de::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_in_decimal_and_binary_units() {
        assert_eq!("8GiB".parse::<ByteSize>(), Ok(ByteSize(8 << 30)));
        assert_eq!("8 GB".parse::<ByteSize>(), Ok(ByteSize(8_000_000_000)));
        assert_eq!("1.5gb".parse::<ByteSize>(), Ok(ByteSize(1_500_000_000)));
        assert_eq!("500MiB".parse::<ByteSize>(), Ok(ByteSize(500 << 20)));
        assert_eq!("4096".parse::<ByteSize>(), Ok(ByteSize(4096)));
        for bad in ["", "GB", "8 parsecs", "-1GB", "0", "1e400"] {
            let e = bad.parse::<ByteSize>().unwrap_err();
            assert!(e.contains("expected a size"), "{bad}: {e}");
        }
    }

    #[test]
    fn cache_sizes_read_back_from_their_compact_form() {
        for (text, bytes) in [("0", 0), ("none", 0), ("4GiB", 4 << 30), ("1.5GB", 1_500_000_000)] {
            let size: CacheSize = text.parse().unwrap();
            assert_eq!(size, CacheSize(bytes), "{text}");
            assert_eq!(ByteSize::compact(bytes).parse::<CacheSize>(), Ok(size), "{text}");
        }
        assert_eq!(ByteSize::compact(4 << 30), "4GiB");
        assert_eq!(ByteSize::compact(512 << 20), "512MiB");
        assert_eq!(ByteSize::compact(12345), "12345");
        let e = "lots".parse::<CacheSize>().unwrap_err();
        assert!(e.contains("expected a size") && e.contains("0 (none)"), "{e}");
    }
}
