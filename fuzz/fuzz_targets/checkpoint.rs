//! Any bytes as a checkpoint: the first two bytes give the length of the `.index` file,
//! the rest after it is the data file. Opening it and reading every key, whole and by a
//! slice, is an `Ok` or an `Err` (`DataLoss`, `NotFound`, ...), never a panic, a hang or
//! an allocation the files do not justify.

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use polytensor_core::checkpoint::{data_path, index_path, Reader};
use polytensor_core::TensorSlice;

fn dir() -> &'static std::path::Path {
    static DIR: OnceLock<std::path::PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("polytensor-fuzz-ckpt-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((len, rest)) = data.split_first_chunk::<2>() else {
        return;
    };
    let split = usize::from(u16::from_le_bytes(*len)).min(rest.len());
    let (index, contents) = rest.split_at(split);
    let prefix = dir().join("ckpt");
    std::fs::write(index_path(&prefix), index).unwrap();
    std::fs::write(data_path(&prefix, 0, 1), contents).unwrap();
    let Ok(reader) = Reader::open(&prefix) else {
        return;
    };
    let device = polytensor_cpu::CpuDevice::shared();
    let keys: Vec<String> = reader.entries().map(|(k, _)| k.to_string()).collect();
    for key in keys {
        let _ = reader.read(&key, &device);
        let rank = reader.entry(&key).map(|e| e.shape().rank()).unwrap_or(0);
        let _ = reader.read_slice(&key, &TensorSlice::full(rank), &device);
    }
});
