//! Link the system OpenBLAS (Debian `libopenblas-dev`), the BLAS peer of the matmul benches,
//! when the feature `peers` is on (and only then: the tests build without it).

fn main() {
    println!("cargo:rerun-if-env-changed=CARGO_FEATURE_PEERS");
    if std::env::var_os("CARGO_FEATURE_PEERS").is_some() {
        println!("cargo:rustc-link-lib=openblas");
    }
}
