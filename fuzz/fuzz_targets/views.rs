//! Any bytes as a program of view operations (slices, narrows, transposes, permutes,
//! broadcasts, reshapes, squeezes, bitcasts, contiguous copies) on a small CPU tensor: each
//! step is an `Ok` or an `Err`, never a panic, an abort or an out-of-bounds access, and every
//! view reads back the element count and bytes its shape promises.

#![no_main]

use libfuzzer_sys::fuzz_target;
use polytensor_core::{DataType, Tensor};

/// The dtypes a program may bitcast to (every fixed element size, and checked bytes).
const DTYPES: [DataType; 9] = [
    DataType::UInt8,
    DataType::Bool,
    DataType::Int4,
    DataType::Half,
    DataType::Float,
    DataType::Int32,
    DataType::Double,
    DataType::Complex64,
    DataType::Complex128,
];

/// Reads small numbers from the input, zeros once it is exhausted.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        let Some((&b, rest)) = self.0.split_first() else {
            return 0;
        };
        self.0 = rest;
        b
    }

    fn small(&mut self, below: usize) -> usize {
        usize::from(self.byte()) % below.max(1)
    }

    fn signed(&mut self) -> isize {
        isize::from(self.byte() as i8)
    }
}

fn step(t: &Tensor, input: &mut Input) -> Option<Tensor> {
    let rank = t.rank();
    let result = match input.byte() % 12 {
        0 => t.slice(input.small(8)..input.small(8)),
        1 => t.narrow(input.signed(), input.small(8), input.small(8)),
        2 => t.transpose(input.signed(), input.signed()),
        3 => {
            let mut perm: Vec<usize> = (0..rank).collect();
            perm.rotate_left(input.small(rank));
            t.permute(&perm)
        }
        4 => {
            let mut dims = vec![input.small(4)];
            dims.extend(t.dims());
            t.broadcast_to(dims)
        }
        5 => {
            let dims: Vec<usize> = (0..input.small(4)).map(|_| input.small(9)).collect();
            t.reshape(dims)
        }
        6 => t.squeeze(input.signed()),
        7 => t.unsqueeze(input.signed()),
        8 => t.sub_slice(input.small(8)),
        9 => t.bitcast(DTYPES[input.small(DTYPES.len())]),
        10 => t.contiguous(),
        _ => t.slice_by(
            &format!("{},{}", input.small(4), input.small(4))
                .parse()
                .ok()?,
        ),
    };
    result.ok()
}

fuzz_target!(|data: &[u8]| {
    let cpu = polytensor_cpu::CpuDevice::shared();
    let mut input = Input(data);
    let len = 1 + input.small(96);
    let bytes: Vec<u8> = (0..len).map(|_| input.byte() & 1).collect();
    let Ok(mut t) = Tensor::from_slice(&bytes, [len], &cpu) else {
        return;
    };
    for _ in 0..16 {
        if let Some(next) = step(&t, &mut input) {
            t = next;
        }
        let n = t.num_elements();
        assert_eq!(t.shape().num_elements(), n);
        if t.dtype() != DataType::String {
            assert_eq!(t.to_bytes().unwrap().len(), n * t.dtype().size());
        }
        let _ = t.to_string();
    }
});
