//! The checked-in C headers are what cbindgen makes from the code now: a change to the C
//! API without a new header fails here. `POLYTENSOR_BLESS=1` rewrites them instead.

use std::path::{Path, PathBuf};

fn generate(crate_dir: &Path, config: &Path) -> String {
    let config = cbindgen::Config::from_file(config).expect("a valid cbindgen config");
    let mut out = Vec::new();
    cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen parses the crate")
        .write(&mut out);
    String::from_utf8(out).expect("UTF-8 header")
}

fn check(header: &str, generated: String) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("include")
        .join(header);
    if std::env::var_os("POLYTENSOR_BLESS").is_some() {
        std::fs::write(&path, generated).unwrap();
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "{} is stale: regenerate it with `POLYTENSOR_BLESS=1 cargo test -p polytensor-capi \
         --test it -- header::` and commit it",
        path.display()
    );
}

#[test]
fn polytensor_h_is_current() {
    let capi = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    check("polytensor.h", generate(&capi, &capi.join("cbindgen.toml")));
}

#[test]
fn polytensor_dlpack_h_is_current() {
    let capi = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let core = capi.parent().unwrap().join("tensor-core");
    check(
        "polytensor_dlpack.h",
        generate(&core, &capi.join("cbindgen-dlpack.toml")),
    );
}
