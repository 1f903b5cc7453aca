//! Typed value buffers: a column's decoded values and a sample's arrays.

use serde::Serialize;

use super::meta::ScalarType;

/// Values of one element type, in row-major order.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Values {
    /// float32
    F32(Vec<f32>),
    /// float64
    F64(Vec<f64>),
    /// int64
    I64(Vec<i64>),
    /// int32
    I32(Vec<i32>),
    /// bool
    Bool(Vec<bool>),
    /// uint8 (decoded pixels)
    U8(Vec<u8>),
    /// string
    Str(Vec<String>),
}

impl Values {
    /// An empty buffer of `scalar` type with room for `capacity` values.
    pub fn with_capacity(scalar: Option<ScalarType>, capacity: usize) -> Self {
        match scalar {
            Some(ScalarType::Float32) => Self::F32(Vec::with_capacity(capacity)),
            Some(ScalarType::Float64) => Self::F64(Vec::with_capacity(capacity)),
            Some(ScalarType::Int64) => Self::I64(Vec::with_capacity(capacity)),
            Some(ScalarType::Int32) => Self::I32(Vec::with_capacity(capacity)),
            Some(ScalarType::Bool) => Self::Bool(Vec::with_capacity(capacity)),
            None => Self::Str(Vec::with_capacity(capacity)),
        }
    }

    /// An empty buffer of this one's element type with room for `capacity` values.
    pub fn empty_like(&self, capacity: usize) -> Self {
        match self {
            Self::F32(_) => Self::F32(Vec::with_capacity(capacity)),
            Self::F64(_) => Self::F64(Vec::with_capacity(capacity)),
            Self::I64(_) => Self::I64(Vec::with_capacity(capacity)),
            Self::I32(_) => Self::I32(Vec::with_capacity(capacity)),
            Self::Bool(_) => Self::Bool(Vec::with_capacity(capacity)),
            Self::U8(_) => Self::U8(Vec::with_capacity(capacity)),
            Self::Str(_) => Self::Str(Vec::with_capacity(capacity)),
        }
    }

    /// Removes every value, keeping the allocation.
    pub fn clear(&mut self) {
        match self {
            Self::F32(v) => v.clear(),
            Self::F64(v) => v.clear(),
            Self::I64(v) => v.clear(),
            Self::I32(v) => v.clear(),
            Self::Bool(v) => v.clear(),
            Self::U8(v) => v.clear(),
            Self::Str(v) => v.clear(),
        }
    }

    /// Makes room for `additional` more values (none allocated where there is room).
    pub fn reserve(&mut self, additional: usize) {
        match self {
            Self::F32(v) => v.reserve(additional),
            Self::F64(v) => v.reserve(additional),
            Self::I64(v) => v.reserve(additional),
            Self::I32(v) => v.reserve(additional),
            Self::Bool(v) => v.reserve(additional),
            Self::U8(v) => v.reserve(additional),
            Self::Str(v) => v.reserve(additional),
        }
    }

    /// Whether it holds values of `scalar` type (None: strings).
    pub fn is_of(&self, scalar: Option<ScalarType>) -> bool {
        matches!(
            (self, scalar),
            (Self::F32(_), Some(ScalarType::Float32))
                | (Self::F64(_), Some(ScalarType::Float64))
                | (Self::I64(_), Some(ScalarType::Int64))
                | (Self::I32(_), Some(ScalarType::Int32))
                | (Self::Bool(_), Some(ScalarType::Bool))
                | (Self::Str(_), None)
        )
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            Self::F32(v) => v.len(),
            Self::F64(v) => v.len(),
            Self::I64(v) => v.len(),
            Self::I32(v) => v.len(),
            Self::Bool(v) => v.len(),
            Self::U8(v) => v.len(),
            Self::Str(v) => v.len(),
        }
    }

    /// True when there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends `src[range]`; both buffers hold the same element type (one column's values).
    pub fn extend_from(&mut self, src: &Values, range: std::ops::Range<usize>) {
        match (self, src) {
            (Self::F32(dst), Self::F32(src)) => dst.extend_from_slice(&src[range]),
            (Self::F64(dst), Self::F64(src)) => dst.extend_from_slice(&src[range]),
            (Self::I64(dst), Self::I64(src)) => dst.extend_from_slice(&src[range]),
            (Self::I32(dst), Self::I32(src)) => dst.extend_from_slice(&src[range]),
            (Self::Bool(dst), Self::Bool(src)) => dst.extend_from_slice(&src[range]),
            (Self::U8(dst), Self::U8(src)) => dst.extend_from_slice(&src[range]),
            (Self::Str(dst), Self::Str(src)) => dst.extend_from_slice(&src[range]),
            (dst, src) => {
                unreachable!("copy between {} and {} buffers", dst.type_name(), src.type_name())
            }
        }
    }

    /// The value at `i` widened to f64 (strings give NaN), for display and timestamps.
    pub fn get_f64(&self, i: usize) -> f64 {
        match self {
            Self::F32(v) => f64::from(v[i]),
            Self::F64(v) => v[i],
            Self::I64(v) => v[i] as f64,
            Self::I32(v) => f64::from(v[i]),
            Self::Bool(v) => f64::from(u8::from(v[i])),
            Self::U8(v) => f64::from(v[i]),
            Self::Str(_) => f64::NAN,
        }
    }

    /// The numpy name of the element type.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::F32(_) => "float32",
            Self::F64(_) => "float64",
            Self::I64(_) => "int64",
            Self::I32(_) => "int32",
            Self::Bool(_) => "bool",
            Self::U8(_) => "uint8",
            Self::Str(_) => "string",
        }
    }
}

/// An n-dimensional array of a sample, shaped as LeRobot returns it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Array {
    /// The shape: `[]` for a scalar, `[D]` for a vector, `[T, D]` with a time window.
    pub shape: Vec<usize>,
    /// The values, `shape.iter().product()` of them.
    pub values: Values,
}
