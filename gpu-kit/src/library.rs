//! The helper headers a kernel carries: the dialect header, then the helpers of the types
//! it touches, each header written once in C and instantiated per type by the
//! preprocessor (`REAL`, `R_(name)`, `CPLX`, `C_(name)`).

use crate::{Dialect, Elem, Real};

/// The helpers a kernel needs, by the element types it touches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Library {
    dialect: Dialect,
    fp64: bool,
    complex64: bool,
    complex128: bool,
}

impl Library {
    /// The helpers for kernels over `elems` (and f64 if `fp64`, as a reduction that
    /// accumulates f32 in f64 needs).
    pub fn new(dialect: Dialect, elems: &[Elem], fp64: bool) -> Self {
        Self {
            dialect,
            fp64: fp64 || elems.iter().any(|e| e.needs_fp64()),
            complex64: elems.contains(&Elem::C64),
            complex128: elems.contains(&Elem::C128),
        }
    }

    /// Whether the kernel computes in f64 (the device must have it).
    pub fn needs_fp64(&self) -> bool {
        self.fp64
    }

    /// The text: dialect header, scalar helpers, float helpers per real type, complex
    /// helpers per complex type in use.
    pub fn render(&self) -> String {
        let mut text = self.dialect.header(self.fp64);
        text.push_str(include_str!("c/scalar.h"));
        text.push_str(&real(Real::F32));
        if self.fp64 {
            text.push_str(&real(Real::F64));
            text.push_str(include_str!("c/fp64.h"));
        }
        if self.complex64 {
            text.push_str(&complex("c64", Real::F32, "MAKE_C64"));
        }
        if self.complex128 {
            text.push_str(&complex("c128", Real::F64, "MAKE_C128"));
        }
        text
    }
}

/// `c/real.h` for `real`, with `R_HIGH(a)`: `a` with its low bits cleared, few enough
/// left that `a * a + 0.5625` is exact (fdlibm's split in erfc).
fn real(real: Real) -> String {
    let r = real.name();
    let high = match real {
        Real::F32 => "F32_FROM_BITS(F32_BITS(a) & 0xffffe000u)",
        Real::F64 => "F64_FROM_BITS(F64_BITS(a) & 0xffffffff00000000ul)",
    };
    format!(
        "\n#define REAL {r}\n#define R_(name) name##_{r}\n#define R_HIGH(a) {high}\n{}\
         #undef R_HIGH\n#undef R_\n#undef REAL\n",
        include_str!("c/real.h")
    )
}

/// `c/complex.h` for complex type `c` of part type `real`, built by `make`.
fn complex(c: &str, real: Real, make: &str) -> String {
    let r = real.name();
    format!(
        "\n#define REAL {r}\n#define R_(name) name##_{r}\n#define CPLX {c}\n\
         #define C_(name) name##_{c}\n#define CMAKE {make}\n{}\
         #undef CMAKE\n#undef C_\n#undef CPLX\n#undef R_\n#undef REAL\n",
        include_str!("c/complex.h")
    )
}
