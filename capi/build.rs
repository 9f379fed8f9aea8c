//! Tells the tests which target the library is built for, so that they compile their C
//! programs (with the `cc` crate) for the same one.
fn main() {
    let target = std::env::var("TARGET").unwrap_or_default();
    println!("cargo:rustc-env=POLYTENSOR_CAPI_TARGET={target}");
    println!("cargo:rerun-if-changed=build.rs");
}
