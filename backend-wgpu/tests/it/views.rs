//! Views of device memory on wgpu: bitcasts of misaligned and strided views, byte checks of
//! bool views, and printing huge broadcasts (regressions of the hardening issue).

use crate::common;

use polytensor_core::{DataType, Tensor};

#[test]
fn bitcasts_of_views_copy_once_or_share() {
    let Some(gpu) = common::device_or_skip() else {
        return;
    };
    let raw: Vec<u8> = (1..=8).collect();
    let all = Tensor::from_slice(&raw, [8], &gpu).unwrap();
    // Byte offset 1 is no multiple of 4: this recursed until the stack overflowed.
    let misaligned = all.slice(1..5).unwrap().bitcast(DataType::Float).unwrap();
    assert_eq!(misaligned.to_bytes().unwrap(), raw[1..5]);
    let aligned = all.slice(4..8).unwrap().bitcast(DataType::UInt32).unwrap();
    assert!(aligned.shares_buffer_with(&all));
    assert_eq!(
        aligned.to_vec::<u32>().unwrap(),
        vec![u32::from_le_bytes([5, 6, 7, 8])]
    );
    // A bool bitcast looks only at the view's bytes, read back from the device.
    let mixed = Tensor::from_slice(&[1u8, 0, 7, 1], [4], &gpu).unwrap();
    let ok = mixed.slice(0..2).unwrap().bitcast(DataType::Bool).unwrap();
    assert_eq!(ok.to_vec::<bool>().unwrap(), vec![true, false]);
    assert!(mixed.slice(1..3).unwrap().bitcast(DataType::Bool).is_err());
}

#[test]
fn printing_a_huge_broadcast_reads_only_what_it_prints() {
    let Some(gpu) = common::device_or_skip() else {
        return;
    };
    let pair = Tensor::from_slice(&[1.5f32, 2.5], [2], &gpu).unwrap();
    let huge = pair.broadcast_to(vec![2; 30]).unwrap();
    let before = gpu.allocator().stats();
    let text = huge.to_string();
    let after = gpu.allocator().stats();
    assert!(
        text.contains("[1.5 2.5]") && text.len() < 64 * 1024,
        "{text}"
    );
    assert!(
        after.peak_bytes_in_use - before.bytes_in_use <= 64 * 1024,
        "printing held {} bytes",
        after.peak_bytes_in_use
    );
}
