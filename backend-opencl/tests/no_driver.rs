//! With an ICD loader that finds no platform, OpenCL is absent with a reason, and nothing
//! panics. (Its own test binary: the loader reads OCL_ICD_VENDORS when the process first
//! calls it.)

#[test]
fn without_a_platform_the_backend_says_why() {
    let empty = std::env::temp_dir().join(format!("polytensor-no-icd-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    // Set before this process makes any OpenCL call or other thread.
    std::env::set_var("OCL_ICD_VENDORS", &empty);
    std::env::set_var("OPENCL_VENDOR_PATH", &empty);
    let why = match polytensor_opencl::open_all() {
        Ok(devices) => {
            let names: Vec<&str> = devices.iter().map(|d| d.name()).collect();
            panic!("expected no OpenCL device, got {names:?}");
        }
        Err(why) => why,
    };
    println!("opencl: unavailable ({why})");
    assert!(
        why.contains("no platform") || why.contains("no OpenCL loader"),
        "{why}"
    );
    let opened = polytensor_opencl::first().unwrap_err().to_string();
    assert!(opened.contains("opencl"), "{opened}");
    std::fs::remove_dir(&empty).ok();
}
