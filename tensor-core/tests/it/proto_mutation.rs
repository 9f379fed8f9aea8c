//! Robustness: TensorFlow's golden messages, mutated at random (bit flips, truncations,
//! splices, inserted bytes), decode to `Ok` or `Err`, never panic, and never allocate more
//! than a bound proportional to the input. The tests' counting allocator measures
//! the peak (of the decoding thread).

use std::path::Path;

use polytensor_core::proto::DecodeOptions;
use polytensor_core::Tensor;

use crate::counting::peak_during;

/// SplitMix64: a small seeded generator, so every run mutates the same way.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn mutate(rng: &mut Rng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut out = input.to_vec();
    match rng.below(4) {
        0 => {
            for _ in 0..1 + rng.below(4) {
                if !out.is_empty() {
                    let i = rng.below(out.len());
                    out[i] ^= 1 << rng.below(8);
                }
            }
        }
        1 => out.truncate(rng.below(out.len())),
        2 => {
            let (cut, from) = (rng.below(out.len()), rng.below(other.len()));
            out.truncate(cut);
            out.extend_from_slice(&other[from..]);
        }
        _ => {
            let at = rng.below(out.len() + 1);
            let junk: Vec<u8> = (0..1 + rng.below(6)).map(|_| rng.next() as u8).collect();
            out.splice(at..at, junk);
        }
    }
    out
}

#[test]
fn mutated_goldens_never_panic_or_overallocate() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/tf-golden/tensor_proto");
    if !dir.is_dir() {
        assert!(
            std::env::var_os("POLYTENSOR_REQUIRE_GOLDEN").is_none(),
            "POLYTENSOR_REQUIRE_GOLDEN is set but {} is missing",
            dir.display()
        );
        eprintln!("skipped: no TensorFlow golden files at {}", dir.display());
        return;
    }
    let mut inputs: Vec<Vec<u8>> = ["encode", "decode"]
        .iter()
        .flat_map(|c| std::fs::read_dir(dir.join(c)).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pb"))
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    inputs.sort();
    assert_eq!(inputs.len(), 150);
    // No cache: every byte a decode allocates is counted and returned.
    let device: std::sync::Arc<dyn polytensor_core::Device> =
        polytensor_cpu::CpuDevice::with_cache(polytensor_core::HostAllocator::new(), 0);
    let mut rng = Rng(0x7f_2026);
    let (mut ok, mut err) = (0, 0);
    for iteration in 0..4000 {
        let (a, b) = (rng.below(inputs.len()), rng.below(inputs.len()));
        let input = mutate(&mut rng, &inputs[a], &inputs[b]);
        // A decoded tensor may be larger than its message (a splat), up to this cap.
        let options = DecodeOptions {
            max_bytes: 16 * input.len() + 1024,
        };
        let bound = 64 * input.len() + 2 * options.max_bytes + (64 << 10);
        let len = input.len();
        let (outcome, peak) = peak_during(|| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                Tensor::decode_proto_with(input, &device, &options).map(|t| t.num_elements())
            }))
        });
        match outcome {
            Ok(Ok(_)) => ok += 1,
            Ok(Err(e)) => {
                assert!(!e.to_string().is_empty());
                err += 1;
            }
            Err(_) => panic!("iteration {iteration}: decoding panicked"),
        }
        assert!(
            peak <= bound,
            "iteration {iteration}: {peak} bytes allocated for a {len}-byte input"
        );
    }
    eprintln!("4000 mutated messages: {ok} decoded, {err} rejected");
    assert!(ok > 100 && err > 100, "the mutations reach both outcomes");
}
