//! The slowest conformance cases on the first OpenCL device (a development probe).
use conformance::{cases::all_cases, run_case};
use std::time::Instant;
fn main() {
    let opencl = polytensor_opencl::first().unwrap();
    let device: std::sync::Arc<dyn polytensor_core::Device> = opencl.clone();
    let family = std::env::args().nth(1).unwrap_or_default();
    let mut times = vec![];
    let start = Instant::now();
    for case in all_cases() {
        if !case.name.starts_with(&family) {
            continue;
        }
        let t = Instant::now();
        let _ = run_case(&device, &case);
        times.push((t.elapsed(), case.name.clone()));
    }
    times.sort();
    println!(
        "{} cases in {:?}, {} programs",
        times.len(),
        start.elapsed(),
        opencl.programs_built()
    );
    for (t, n) in times.iter().rev().take(40) {
        println!("{t:?} {n}");
    }
}
