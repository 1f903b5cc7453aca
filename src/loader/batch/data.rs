//! A batched key's values: their element type and their typed storage, allocated once and
//! resized and written in place as batches are reused.

use crate::dataset::Values;

/// The element type of a batched key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElementType {
    /// float32
    F32,
    /// uint8
    U8,
    /// float64
    F64,
    /// int64
    I64,
    /// int32
    I32,
    /// bool
    Bool,
}

/// The element type and storage of one batched key.
#[derive(Debug, Clone, PartialEq)]
pub enum BatchData {
    /// Float values (vectors, or images as float32 in [0, 1]).
    F32(Vec<f32>),
    /// Images as uint8 (normalised on the device).
    U8(Vec<u8>),
    /// float64 features, kept exact.
    F64(Vec<f64>),
    /// Integer values (indices).
    I64(Vec<i64>),
    /// int32 features.
    I32(Vec<i32>),
    /// Pad masks.
    Bool(Vec<bool>),
}

impl ElementType {
    /// Bytes of one value.
    pub fn size(self) -> usize {
        match self {
            Self::U8 | Self::Bool => 1,
            Self::I32 | Self::F32 => 4,
            Self::I64 | Self::F64 => 8,
        }
    }

    pub(super) fn of(values: &Values) -> Option<Self> {
        Some(match values {
            Values::F32(_) => Self::F32,
            Values::F64(_) => Self::F64,
            Values::I64(_) => Self::I64,
            Values::I32(_) => Self::I32,
            Values::Bool(_) => Self::Bool,
            Values::U8(_) => Self::U8,
            Values::Str(_) => return None,
        })
    }
}

impl BatchData {
    /// `len` zeros (fresh pages from the allocator: nothing is written until used).
    pub(super) fn zeroed(element: ElementType, len: usize) -> Self {
        match element {
            ElementType::F32 => Self::F32(vec![0.0; len]),
            ElementType::U8 => Self::U8(vec![0; len]),
            ElementType::F64 => Self::F64(vec![0.0; len]),
            ElementType::I64 => Self::I64(vec![0; len]),
            ElementType::I32 => Self::I32(vec![0; len]),
            ElementType::Bool => Self::Bool(vec![false; len]),
        }
    }

    /// The element type.
    pub fn element(&self) -> ElementType {
        match self {
            Self::F32(_) => ElementType::F32,
            Self::U8(_) => ElementType::U8,
            Self::F64(_) => ElementType::F64,
            Self::I64(_) => ElementType::I64,
            Self::I32(_) => ElementType::I32,
            Self::Bool(_) => ElementType::Bool,
        }
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            Self::F32(v) => v.len(),
            Self::U8(v) => v.len(),
            Self::F64(v) => v.len(),
            Self::I64(v) => v.len(),
            Self::I32(v) => v.len(),
            Self::Bool(v) => v.len(),
        }
    }

    /// True when there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The values as the bytes they occupy (native endianness; a bool as one byte).
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Self::F32(v) => bytemuck::cast_slice(v),
            Self::U8(v) => v,
            Self::F64(v) => bytemuck::cast_slice(v),
            Self::I64(v) => bytemuck::cast_slice(v),
            Self::I32(v) => bytemuck::cast_slice(v),
            // SAFETY: a bool is one byte holding 0 or 1; read as bytes, nothing is written.
            Self::Bool(v) => unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), v.len()) },
        }
    }

    /// Bytes the values occupy.
    pub fn bytes(&self) -> usize {
        let width = match self.element() {
            ElementType::F32 | ElementType::I32 => 4,
            ElementType::F64 | ElementType::I64 => 8,
            ElementType::U8 | ElementType::Bool => 1,
        };
        self.len() * width
    }

    /// Sets the length to `len`: shrinking keeps the allocation, growing zero-fills only the
    /// new tail.
    pub(super) fn resize(&mut self, len: usize) {
        match self {
            Self::F32(v) => v.resize(len, 0.0),
            Self::U8(v) => v.resize(len, 0),
            Self::F64(v) => v.resize(len, 0.0),
            Self::I64(v) => v.resize(len, 0),
            Self::I32(v) => v.resize(len, 0),
            Self::Bool(v) => v.resize(len, false),
        }
    }

    /// Copies `values` to positions `at..at + values.len()`; false when the types differ.
    pub(super) fn write(&mut self, at: usize, values: &Values) -> bool {
        let end = at + values.len();
        match (self, values) {
            (Self::F32(dst), Values::F32(src)) => dst[at..end].copy_from_slice(src),
            (Self::F64(dst), Values::F64(src)) => dst[at..end].copy_from_slice(src),
            (Self::I64(dst), Values::I64(src)) => dst[at..end].copy_from_slice(src),
            (Self::I32(dst), Values::I32(src)) => dst[at..end].copy_from_slice(src),
            (Self::Bool(dst), Values::Bool(src)) => dst[at..end].copy_from_slice(src),
            (Self::U8(dst), Values::U8(src)) => dst[at..end].copy_from_slice(src),
            _ => return false,
        }
        true
    }
}
