//! Link the system OpenBLAS (Debian `libopenblas-dev`), the BLAS peer of the matmul benches.

fn main() {
    println!("cargo:rustc-link-lib=openblas");
}
