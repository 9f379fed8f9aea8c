//! What the kit knows of WGSL beyond expressions: the types kernels compute on ([`Ty`],
//! [`Scalar`]), how each dtype's elements sit in a storage buffer ([`Storage`]: narrow
//! elements packed into `u32` words), the helper templates ([`instantiate`]) and the float
//! helpers every float kernel carries ([`float_helpers`], [`CONVERSIONS`]). The kernel
//! renderer ([`crate::render::wgsl_kernel`]) and the wgpu backend's own templates share
//! them.

mod library;
mod storage;
mod template;
mod ty;

pub use library::{complex_helpers, helpers_for, int_literal};

pub use storage::{Packing, Storage, CONVERSIONS};
pub use template::instantiate;
pub use ty::{Scalar, Ty};

/// The float helpers every map and reduction template carries, for float type `t` (`f32`,
/// or `f64` where the device has SHADER_F64 and SHADER_INT64, which its bit tests need):
/// the f32 power of two `pow2`, and `is_nan`, `float_max`, `float_min`, `round_even` on `t`. WGSL lets
/// compilers assume there are no NaNs (`x != x` folds to false on lavapipe), so NaN is
/// tested on the bits; `max` and `min` propagate NaN and order -0 below +0, as the shared
/// semantics require. f64 templates also get the round-to-odd narrowing that makes f64 to
/// f16/bf16 a single rounding.
pub fn float_helpers(t: Scalar) -> String {
    let wide = t == Scalar::F64;
    let (magnitude, infinity, integral) = if wide {
        // 2^52: from there on every f64 is an integer.
        (
            "0x7ffffffffffffffflu",
            "0x7ff0000000000000lu",
            "4503599627370496.0",
        )
    } else {
        ("0x7fffffffu", "0x7f800000u", "8388608.0")
    };
    let mut helpers = instantiate(
        include_str!("lib/float.wgsl"),
        &[
            ("T", &t),
            ("BITS", &t.bits()),
            ("MAGNITUDE", &magnitude),
            ("INFINITY", &infinity),
            ("INTEGRAL", &integral),
        ],
    );
    if wide {
        helpers.push_str(include_str!("lib/f64_to_f32_odd.wgsl"));
    }
    helpers
}
