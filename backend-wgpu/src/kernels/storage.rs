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

use tensor_core::DataType;

/// How an operand's elements sit in its storage buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Storage {
    /// One WGSL scalar (or complex `vec2`) per element (`f32`, `i32`, `u32`,
    /// `vec2<f32>`; `i64`, `u64`, `f64`, `vec2<f64>` where the device has the features).
    Word(&'static str),
    /// 8- or 16-bit elements packed into `u32` words, computed on as a 32-bit value.
    Packed(Packing),
    /// Elements of this many words, moved as raw bits.
    Wide(u32),
}

/// A narrow element format inside `u32` words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Packing {
    /// bool: a byte 0 or 1.
    Bool,
    I8,
    U8,
    I16,
    U16,
    F16,
    BF16,
}

impl Packing {
    fn bits(self) -> u32 {
        match self {
            Packing::Bool | Packing::I8 | Packing::U8 => 8,
            _ => 16,
        }
    }

    /// The 32-bit WGSL type the kernels compute on.
    pub(crate) fn value_type(self) -> &'static str {
        match self {
            Packing::I8 | Packing::I16 => "i32",
            Packing::F16 | Packing::BF16 => "f32",
            _ => "u32",
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
    fn encode(self, v: &str) -> String {
        let mask = self.mask();
        match self {
            Packing::I8 | Packing::I16 => format!("(bitcast<u32>({v}) & {mask}u)"),
            Packing::F16 => format!("f32_to_f16({v})"),
            Packing::BF16 => format!("f32_to_bf16({v})"),
            _ => format!("({v} & {mask}u)"),
        }
    }

    fn mask(self) -> u32 {
        (1u32 << self.bits()) - 1
    }
}

impl Storage {
    /// How `dtype` is stored for computing on it, if the kernels compute on it.
    pub(crate) fn of(dtype: DataType) -> Option<Storage> {
        Some(match dtype {
            DataType::Float => Storage::Word("f32"),
            DataType::Double => Storage::Word("f64"),
            DataType::Int64 => Storage::Word("i64"),
            DataType::UInt64 => Storage::Word("u64"),
            DataType::Complex64 => Storage::Word("vec2<f32>"),
            DataType::Complex128 => Storage::Word("vec2<f64>"),
            DataType::Int32 => Storage::Word("i32"),
            DataType::UInt32 => Storage::Word("u32"),
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

    /// How `dtype`'s bytes are moved when nothing is computed on them (copy, fill, where):
    /// by element size, for every fixed-size dtype.
    pub(crate) fn raw(dtype: DataType) -> Option<Storage> {
        if !dtype.is_pod() {
            return None;
        }
        Some(match dtype.size() {
            1 => Storage::Packed(Packing::U8),
            2 => Storage::Packed(Packing::U16),
            4 => Storage::Word("u32"),
            size if size % 4 == 0 => Storage::Wide(size as u32 / 4),
            _ => return None,
        })
    }

    /// The WGSL type of the storage array's items.
    pub(crate) fn array_type(self) -> &'static str {
        match self {
            Storage::Word(t) => t,
            _ => "u32",
        }
    }

    /// The WGSL type the kernels see an element as.
    pub(crate) fn value_type(self) -> &'static str {
        match self {
            Storage::Word(t) => t,
            Storage::Packed(p) => p.value_type(),
            Storage::Wide(2) => "vec2<u32>",
            Storage::Wide(_) => "vec4<u32>",
        }
    }

    /// The expression loading element position `p` (an `i32`) of array `array`.
    pub(crate) fn load(self, array: &str, p: &str) -> String {
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
    pub(crate) fn lanes(self) -> usize {
        match self {
            Storage::Packed(p) => 32 / p.bits() as usize,
            _ => 1,
        }
    }

    /// The body of a kernel that writes the elements of invocation `i` into `out` from
    /// `element(index)`, with `count` (a `u32` expression) elements in all.
    pub(crate) fn store_body(self, count: &str) -> String {
        match self {
            Storage::Word(_) => {
                format!("    if (i < {count}) {{\n        out[i] = element(i);\n    }}\n")
            }
            Storage::Packed(packing) => format!(
                r#"    let lanes = {lanes}u;
    let first = i * lanes;
    if (first >= {count}) {{
        return;
    }}
    var word = 0u;
    for (var lane = 0u; lane < lanes; lane++) {{
        if (first + lane < {count}) {{
            word |= {field} << (lane * {bits}u);
        }}
    }}
    out[i] = word;
"#,
                lanes = self.lanes(),
                bits = packing.bits(),
                field = packing.encode("element(first + lane)"),
            ),
            Storage::Wide(n) => {
                let words: String = (0..n)
                    .map(|w| format!("        out[{n}u * i + {w}u] = v[{w}];\n"))
                    .collect();
                format!("    if (i < {count}) {{\n        let v = element(i);\n{words}    }}\n")
            }
        }
    }
}

/// WGSL helpers every template carries: exact f32 to f16 and bf16 rounding (to nearest
/// even, overflow to infinity, NaN kept quiet), and integers to floats of `p` significant
/// bits rounded once (the device's own `f32(int)` may round twice on the way to f16).
/// They use the float helpers' `pow2`.
pub(crate) const CONVERSIONS: &str = r#"
fn f32_to_f16(v: f32) -> u32 {
    let x = bitcast<u32>(v);
    let sign = (x >> 16u) & 0x8000u;
    let a = x & 0x7fffffffu;
    if (a > 0x7f800000u) {
        return sign | 0x7e00u | ((a >> 13u) & 0x3ffu);
    }
    if (a >= 0x477ff000u) {
        return sign | 0x7c00u;
    }
    var q = 0u;
    var rest = 0u;
    var half = 0u;
    if (a >= 0x38800000u) {
        let r = a - 0x38000000u;
        q = r >> 13u;
        rest = r & 0x1fffu;
        half = 0x1000u;
    } else {
        let e = a >> 23u;
        if (e < 102u) {
            return sign;
        }
        let m = (a & 0x7fffffu) | 0x800000u;
        let shift = 126u - e;
        q = m >> shift;
        rest = m & ((1u << shift) - 1u);
        half = 1u << (shift - 1u);
    }
    return sign | (q + select(0u, 1u, rest > half || (rest == half && (q & 1u) == 1u)));
}

fn f32_to_bf16(v: f32) -> u32 {
    let x = bitcast<u32>(v);
    if ((x & 0x7fffffffu) > 0x7f800000u) {
        return (x >> 16u) | 0x40u;
    }
    return (x + 0x7fffu + ((x >> 16u) & 1u)) >> 16u;
}

// The magnitude `m` rounded to `p` significant bits (to nearest even) as an exact f32,
// negated if `negative`.
fn int_to_float(m: u32, negative: bool, p: u32) -> f32 {
    let width = 32u - countLeadingZeros(m);
    var q = m;
    var scale = 1.0;
    if (width > p) {
        let shift = width - p;
        q = m >> shift;
        let rest = m & ((1u << shift) - 1u);
        let half = 1u << (shift - 1u);
        if (rest > half || (rest == half && (q & 1u) == 1u)) {
            q += 1u;
        }
        scale = pow2(i32(shift));
    }
    let v = f32(q) * scale;
    return select(v, -v, negative);
}
"#;
