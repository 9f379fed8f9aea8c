//! With no Vulkan driver to load, wgpu is absent with a reason, and nothing panics. (Its
//! own test binary: the loader reads the variables when the process's instance is made.)

#[test]
fn without_a_driver_the_backend_says_why() {
    // Set before this process makes any wgpu instance or other thread.
    std::env::set_var("VK_ICD_FILENAMES", "/nonexistent/icd.json");
    std::env::set_var("VK_DRIVER_FILES", "/nonexistent/icd.json");
    std::env::set_var("WGPU_BACKEND", "vulkan");
    let why = match polytensor_wgpu::open_all() {
        Ok(devices) => {
            let names: Vec<&str> = devices.iter().map(|d| d.name()).collect();
            panic!("expected no adapter, got {names:?}");
        }
        Err(why) => why,
    };
    assert!(why.contains("no wgpu adapter"), "{why}");
    assert!(why.contains("mesa-vulkan-drivers"), "{why}");
    let opened = polytensor_wgpu::open(0).unwrap_err().to_string();
    assert!(opened.contains("no wgpu adapter 0"), "{opened}");
}
