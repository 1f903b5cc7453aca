//! Byte counts as people read them, in decimal units (`999 B`, `23.4 MB`, `2.0 GB`): the one
//! formatter of sizes in messages and reports. It sits on the dataset's floor so that every
//! module above (the loader, the measurements, the front ends) can use it. The sizes users
//! write (`8GiB`) and their read-back form are [`super::size::ByteSize`].

use std::fmt;

/// The units, 1000 apart.
const UNITS: [&str; 5] = ["B", "kB", "MB", "GB", "TB"];
/// Where [`Bytes::gb`] holds the unit.
const GB: usize = 3;

/// A number of bytes to print: `{}` picks the largest unit it reaches (`23.4 MB`), [`Bytes::gb`]
/// holds it to gigabytes (`0.4 GB`); a precision (`{:.2}`) sets the decimals, one by default.
/// Bytes below a kilobyte are whole (`999 B`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bytes {
    /// How many.
    bytes: f64,
    /// Index into [`UNITS`]; None: the largest it reaches.
    unit: Option<usize>,
}

impl Bytes {
    /// `bytes`, in the largest unit they reach.
    pub fn new(bytes: f64) -> Self {
        Self { bytes, unit: None }
    }

    /// A whole number of bytes, in the largest unit it reaches.
    pub fn of(bytes: u64) -> Self {
        Self::new(bytes as f64)
    }

    /// The same bytes in gigabytes (10⁹), whatever their size.
    pub fn gb(self) -> Self {
        Self { unit: Some(GB), ..self }
    }
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (value, unit) = match self.unit {
            Some(unit) => (self.bytes / 1000f64.powi(unit as i32), unit),
            None => {
                let (mut value, mut unit) = (self.bytes, 0);
                while value >= 1000.0 && unit + 1 < UNITS.len() {
                    value /= 1000.0;
                    unit += 1;
                }
                (value, unit)
            }
        };
        let decimals = if unit == 0 { 0 } else { f.precision().unwrap_or(1) };
        write!(f, "{value:.decimals$} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_read_in_the_unit_they_reach_or_in_gigabytes() {
        assert_eq!(Bytes::of(999).to_string(), "999 B");
        assert_eq!(Bytes::of(23_400_000).to_string(), "23.4 MB");
        assert_eq!(Bytes::of(12_000_000_000).to_string(), "12.0 GB");
        assert_eq!(Bytes::new(1.5e15).to_string(), "1500.0 TB");
        assert_eq!(format!("{:.2}", Bytes::new(2346.0)), "2.35 kB");
        assert_eq!(Bytes::of(2_000_000_000).gb().to_string(), "2.0 GB");
        assert_eq!(format!("{:.2}", Bytes::of(400_000_000).gb()), "0.40 GB");
        assert_eq!(format!("{:.2}", Bytes::of(0).gb()), "0.00 GB");
    }
}
