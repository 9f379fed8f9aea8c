//! How each dtype's elements sit in a storage buffer, and the WGSL that reads and writes
//! them: the bytes are always the host's bytes, so copies in and out are plain.
//!
//! - `f32`, `i32`, `u32` are one WGSL scalar per element, and so are `i64` and `u64` on
//!   devices with SHADER_INT64 and `f64` on devices with SHADER_F64 as well (elsewhere
//!   they are only moved).
//! - bool, 8- and 16-bit integers, f16 and bf16 are packed two or four to a `u32` word and
//!   computed on as a 32-bit value (`u32`, `i32` or `f32`). Integer results wrap when they
//!   are narrowed back; f16 and bf16 results are rounded once, to nearest even, from `f32`,
//!   which is exact for `+ - * /` and `sqrt` (f32 carries more than twice their precision
//!   plus two bits, so the double rounding is innocuous). The device needs no SHADER_F16.
//! - complex64 and complex128 are one `vec2` of their part type per element (complex128
//!   needs the f64 features).
//! - Other elements are moved as raw words (copy, fill, where), not computed on.

use polytensor_core::DataType;

use crate::Elem;

use super::ty::{Scalar, Ty};

/// How an operand's elements sit in its storage buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Storage {
    /// One WGSL scalar (or complex `vec2`) per element (`f32`, `i32`, `u32`,
    /// `vec2<f32>`; `i64`, `u64`, `f64`, `vec2<f64>` where the device has the features).
    Word(Ty),
    /// 8- or 16-bit elements packed into `u32` words, computed on as a 32-bit value.
    Packed(Packing),
    /// Elements of this many words, moved as raw bits.
    Wide(u32),
}

/// A narrow element format inside `u32` words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Packing {
    /// bool: a byte 0 or 1.
    Bool,
    /// int8.
    I8,
    /// uint8.
    U8,
    /// int16.
    I16,
    /// uint16.
    U16,
    /// IEEE binary16, computed in f32.
    F16,
    /// bfloat16, computed in f32.
    BF16,
}

impl Packing {
    /// Its width in bits.
    pub fn bits(self) -> u32 {
        match self {
            Packing::Bool | Packing::I8 | Packing::U8 => 8,
            _ => 16,
        }
    }

    /// The 32-bit WGSL type the kernels compute on.
    pub fn value_type(self) -> Scalar {
        match self {
            Packing::I8 | Packing::I16 => Scalar::I32,
            Packing::F16 | Packing::BF16 => Scalar::F32,
            _ => Scalar::U32,
        }
    }

    /// The value of the raw field `raw` (a `u32`, already shifted and masked).
    fn decode(self, raw: &str) -> String {
        let bits = self.bits();
        match self {
            Packing::I8 | Packing::I16 => {
                format!("(bitcast<i32>({raw} << {s}u) >> {s}u)", s = 32 - bits)
            }
            Packing::F16 => format!("unpack2x16float({raw}).x"),
            Packing::BF16 => format!("bitcast<f32>({raw} << 16u)"),
            _ => raw.to_string(),
        }
    }

    /// The raw field of value `v`: integers wrap, floats round to nearest even.
    pub fn encode(self, v: &str) -> String {
        let mask = self.mask();
        match self {
            Packing::I8 | Packing::I16 => format!("(bitcast<u32>({v}) & {mask}u)"),
            Packing::F16 => format!("f32_to_f16({v})"),
            Packing::BF16 => format!("f32_to_bf16({v})"),
            _ => format!("({v} & {mask}u)"),
        }
    }

    /// The mask of one element's bits.
    pub fn mask(self) -> u32 {
        (1u32 << self.bits()) - 1
    }
}

impl Storage {
    /// How `dtype` is stored for computing on it, if the kernels compute on it.
    pub fn of(dtype: DataType) -> Option<Storage> {
        Some(match dtype {
            DataType::Float => Storage::Word(Ty::Real(Scalar::F32)),
            DataType::Double => Storage::Word(Ty::Real(Scalar::F64)),
            DataType::Int64 => Storage::Word(Ty::Real(Scalar::I64)),
            DataType::UInt64 => Storage::Word(Ty::Real(Scalar::U64)),
            DataType::Complex64 => Storage::Word(Ty::Complex(Scalar::F32)),
            DataType::Complex128 => Storage::Word(Ty::Complex(Scalar::F64)),
            DataType::Int32 => Storage::Word(Ty::Real(Scalar::I32)),
            DataType::UInt32 => Storage::Word(Ty::Real(Scalar::U32)),
            DataType::Bool => Storage::Packed(Packing::Bool),
            DataType::Int8 => Storage::Packed(Packing::I8),
            DataType::UInt8 => Storage::Packed(Packing::U8),
            DataType::Int16 => Storage::Packed(Packing::I16),
            DataType::UInt16 => Storage::Packed(Packing::U16),
            DataType::Half => Storage::Packed(Packing::F16),
            DataType::BFloat16 => Storage::Packed(Packing::BF16),
            _ => return None,
        })
    }

    /// How elements of kit type `e` are stored for computing on them.
    pub fn of_elem(e: Elem) -> Option<Storage> {
        Storage::of(e.dtype())
    }

    /// How the kit's raw move elements (`U8`, `U16`, `U32`, `U64`, `C128`) are stored.
    pub fn raw_elem(e: Elem) -> Option<Storage> {
        Storage::raw_bytes(e.dtype().size())
    }

    /// How `dtype`'s bytes are moved when nothing is computed on them (copy, fill, where):
    /// by element size, for every fixed-size dtype.
    pub fn raw(dtype: DataType) -> Option<Storage> {
        if !dtype.is_pod() {
            return None;
        }
        Storage::raw_bytes(dtype.size())
    }

    /// How elements of `size` bytes are moved.
    fn raw_bytes(size: usize) -> Option<Storage> {
        Some(match size {
            1 => Storage::Packed(Packing::U8),
            2 => Storage::Packed(Packing::U16),
            4 => Storage::Word(Ty::Real(Scalar::U32)),
            size if size % 4 == 0 => Storage::Wide(size as u32 / 4),
            _ => return None,
        })
    }

    /// The WGSL type of the storage array's items.
    pub fn array_type(self) -> Ty {
        match self {
            Storage::Word(t) => t,
            _ => Ty::Real(Scalar::U32),
        }
    }

    /// The WGSL type the kernels see an element as.
    pub fn value_type(self) -> Ty {
        match self {
            Storage::Word(t) => t,
            Storage::Packed(p) => Ty::Real(p.value_type()),
            Storage::Wide(2) => Ty::Words(2),
            Storage::Wide(_) => Ty::Words(4),
        }
    }

    /// The expression loading element position `p` (an `i32`) of array `array`.
    pub fn load(self, array: &str, p: &str) -> String {
        match self {
            Storage::Word(_) => format!("{array}[{p}]"),
            Storage::Packed(packing) => {
                let bits = packing.bits();
                let lanes = 32 / bits;
                let raw = format!(
                    "(({array}[u32({p}) / {lanes}u] >> ((u32({p}) % {lanes}u) * {bits}u)) & {mask}u)",
                    mask = packing.mask()
                );
                packing.decode(&raw)
            }
            Storage::Wide(n) => {
                let words: Vec<String> = (0..n)
                    .map(|w| format!("{array}[{n}u * u32({p}) + {w}u]"))
                    .collect();
                format!("{}({})", self.value_type(), words.join(", "))
            }
        }
    }

    /// Elements each invocation writes: a packed output writes whole words.
    pub fn lanes(self) -> usize {
        match self {
            Storage::Packed(p) => 32 / p.bits() as usize,
            _ => 1,
        }
    }

    /// How many invocations write `count` (a `u32` expression) elements from element `base`
    /// (a `u32` expression) on: one per element, or for a packed output one per word (the
    /// first word may hold elements before `base`).
    pub fn invocations(self, count: &str, base: &str) -> String {
        match self {
            Storage::Packed(_) => {
                let lanes = self.lanes();
                format!(
                    "(({base} % {lanes}u) + {count} + {}u) / {lanes}u",
                    lanes - 1
                )
            }
            Storage::Word(_) | Storage::Wide(_) => count.to_string(),
        }
    }

    /// The statements (of invocation `i`, below [`Storage::invocations`]) that write its
    /// elements into `array` from
    /// `element(index)`, with `count` (a `u32` expression) elements in all, from element
    /// `base` (a `u32` expression) of `array` on. A packed output's invocation writes one
    /// whole word of `out`, keeping the bits of the lanes outside the range (the neighbours
    /// of a block written at an offset), so no two invocations write one word.
    pub fn store_body(self, array: &str, count: &str, base: &str) -> String {
        match self {
            Storage::Word(_) => format!("    {array}[{base} + i] = element(i);\n"),
            Storage::Packed(packing) => format!(
                r#"    let lanes = {lanes}u;
    let skip = {base} % lanes;
    let first = i * lanes;
    let at = {base} / lanes + i;
    var word = 0u;
    var kept = 0u;
    for (var lane = 0u; lane < lanes; lane++) {{
        let position = first + lane;
        if (position >= skip && position - skip < {count}) {{
            word |= {field} << (lane * {bits}u);
        }} else {{
            kept |= {mask}u << (lane * {bits}u);
        }}
    }}
    if (kept != 0u) {{
        word |= {array}[at] & kept;
    }}
    {array}[at] = word;
"#,
                lanes = self.lanes(),
                bits = packing.bits(),
                mask = packing.mask(),
                field = packing.encode("element(position - skip)"),
            ),
            Storage::Wide(n) => {
                let words: String = (0..n)
                    .map(|w| format!("    {array}[{n}u * ({base} + i) + {w}u] = v[{w}];\n"))
                    .collect();
                format!("    let v = element(i);\n{words}")
            }
        }
    }
}

/// WGSL helpers every template carries: exact f32 to f16 and bf16 rounding (to nearest
/// even, overflow to infinity, NaN kept quiet), and integers to floats of `p` significant
/// bits rounded once (the device's own `f32(int)` may round twice on the way to f16).
/// They use the float helpers' `pow2`.
pub const CONVERSIONS: &str = include_str!("lib/conversions.wgsl");
