//! Property tests of the core's parsers, codecs and layouts: `TensorSlice` strings in any form
//! TensorFlow accepts parse to the slice they spell, and canonical strings and protos round
//! trip; tensors of random dtypes and shapes round-trip through every `TensorProto` encoding;
//! random layouts, and every view derived from them, never reach outside their span.

use std::sync::Arc;

use polytensor_core::proto::{Message, TensorProto};
use polytensor_core::{DataType, Device, Extent, Layout, Tensor, TensorShape, TensorSlice};
use polytensor_cpu::CpuDevice;
use proptest::prelude::*;

fn cpu() -> Arc<dyn Device> {
    CpuDevice::shared()
}

fn extent() -> impl Strategy<Value = Extent> {
    prop_oneof![
        Just(Extent::Full),
        (0i64..1000, 1i64..1000).prop_map(|(start, length)| Extent::Range { start, length }),
        (0i64..1000).prop_map(|back| Extent::Range {
            start: i64::MAX - 1000 - back,
            length: 1000,
        }),
    ]
}

/// Whitespace as absl's `SimpleAtoi` skips it.
fn blank() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec![" ", "\t", "\n", "\x0b", "\r", "\x0c"]),
        0..2,
    )
    .prop_map(|parts| parts.concat())
}

/// A number as TensorFlow's parser accepts it: whitespace around, an optional `+`, leading
/// zeros.
fn number(value: i64) -> impl Strategy<Value = String> {
    (blank(), any::<bool>(), 0usize..3, blank()).prop_map(move |(pre, plus, zeros, post)| {
        format!(
            "{pre}{}{}{value}{post}",
            if plus { "+" } else { "" },
            "0".repeat(zeros)
        )
    })
}

/// `slice` spelled in one of the many forms TensorFlow's `TensorSlice::Parse` accepts.
fn spelled(slice: TensorSlice) -> impl Strategy<Value = String> {
    let items: Vec<BoxedStrategy<String>> = slice
        .extents()
        .iter()
        .map(|&e| match e {
            Extent::Full => Just("-".to_string()).boxed(),
            Extent::Range { start, length } => (number(start), number(length), 0usize..3)
                .prop_map(|(s, l, commas)| {
                    format!(
                        "{}{s},{}{l}",
                        ",".repeat(commas % 2),
                        ",".repeat(commas / 2)
                    )
                })
                .boxed(),
        })
        .collect();
    (items, prop::collection::vec(0usize..2, slice.rank() + 1)).prop_map(|(items, empties)| {
        let mut text = ":".repeat(empties[0]);
        for (item, &extra) in items.iter().zip(&empties[1..]) {
            text.push_str(item);
            text.push(':');
            text.push_str(&":".repeat(extra));
        }
        text
    })
}

fn pod_dtype() -> impl Strategy<Value = DataType> {
    prop::sample::select(
        DataType::ALL
            .iter()
            .copied()
            .filter(|d| d.is_pod())
            .collect::<Vec<_>>(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn slices_round_trip_through_every_spelling(
        (slice, text) in prop::collection::vec(extent(), 0..5)
            .prop_map(|e| TensorSlice::new(e).unwrap())
            .prop_flat_map(|s| (Just(s.clone()), spelled(s)))
    ) {
        prop_assert_eq!(text.parse::<TensorSlice>().unwrap(), slice.clone(), "{:?}", text);
        prop_assert_eq!(slice.to_string().parse::<TensorSlice>().unwrap(), slice.clone());
        prop_assert_eq!(TensorSlice::from_proto(&slice.to_proto()).unwrap(), slice);
    }

    #[test]
    fn any_slice_text_parses_or_errs(text in "[-+0-9,: \t]{0,24}") {
        if let Ok(slice) = text.parse::<TensorSlice>() {
            prop_assert_eq!(slice.to_string().parse::<TensorSlice>().unwrap(), slice.clone());
            let dims: Vec<usize> = slice.extents().iter()
                .map(|e| e.end().map_or(1, |end| end as usize)).collect();
            if let Ok(shape) = TensorShape::new(&dims) {
                prop_assert!(slice.slice_tensor_shape(&shape).is_ok());
            }
        }
    }

    #[test]
    fn tensors_round_trip_through_every_proto_encoding(
        dtype in pod_dtype(),
        dims in prop::collection::vec(0usize..4, 0..4),
        seed in any::<u64>(),
    ) {
        let n: usize = dims.iter().product();
        let mut state = seed | 1;
        let bytes: Vec<u8> = (0..n * dtype.size())
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                dtype.canonical_byte(state as u8)
            })
            .collect();
        let t = Tensor::from_bytes(&bytes, dims.as_slice(), dtype, &cpu()).unwrap();
        let protos: [TensorProto; 3] =
            [t.to_proto().unwrap(), t.as_proto_field().unwrap(), t.as_proto_tensor_content().unwrap()];
        for proto in &protos {
            let back = Tensor::decode_proto(proto.encode_to_vec(), &cpu()).unwrap();
            prop_assert_eq!(back.dims(), t.dims());
            prop_assert_eq!(back.dtype(), dtype);
            prop_assert_eq!(back.to_bytes().unwrap(), bytes.clone());
            let direct = Tensor::from_proto(proto, &cpu()).unwrap();
            prop_assert_eq!(direct.to_bytes().unwrap(), bytes.clone());
        }
    }

    #[test]
    fn layouts_and_their_views_stay_within_their_span(
        dims in prop::collection::vec(0usize..4, 0..4),
        strides in prop::collection::vec(prop_oneof![-8isize..8, Just(isize::MAX / 3), Just(isize::MIN / 3)], 4),
        offset in prop_oneof![0usize..64, Just(isize::MAX as usize / 2)],
        picks in any::<(u8, u8, u8)>(),
    ) {
        let shape = TensorShape::new(&dims).unwrap();
        let Ok(layout) = Layout::new(shape, &strides[..dims.len()], offset) else {
            return Ok(());
        };
        let span = layout.span();
        let rank = dims.len();
        let pick = |seed: u8, n: usize| usize::from(seed) % n.max(1);
        let mut views = vec![layout.clone()];
        if rank > 0 {
            let dim = pick(picks.0, rank);
            let start = pick(picks.1, dims[dim] + 1);
            views.extend(layout.narrow(dim, start, pick(picks.2, dims[dim] - start + 1)));
            views.extend(layout.transpose(0, rank as isize - 1));
            views.extend(layout.permute(&(0..rank).rev().collect::<Vec<_>>()));
        }
        views.extend(layout.unsqueeze(pick(picks.0, rank + 1)));
        let mut wider = vec![2];
        wider.extend(dims.iter().map(|&d| if d == 1 { 3 } else { d }));
        views.extend(layout.broadcast_to(&TensorShape::new(&wider).unwrap()));
        if let Ok(Some(flat)) = layout.reshape(&TensorShape::new(&[layout.num_elements()]).unwrap()) {
            views.push(flat);
        }
        for view in &views {
            let positions = every_position(view);
            prop_assert_eq!(positions.len(), view.num_elements());
            if let (Some((lo, hi)), Some(&min), Some(&max)) = (span, positions.iter().min(), positions.iter().max()) {
                let (lo, hi) = (lo as i128, hi as i128);
                prop_assert!(lo <= min && max <= hi, "{view:?} reaches {min}..={max}, span {lo}..={hi}");
                if min >= 0 {
                    prop_assert!(view.check_fits(max as usize + 1).is_ok());
                    prop_assert!(view.check_fits(max as usize).is_err());
                } else {
                    prop_assert!(view.check_fits(usize::MAX).is_err());
                }
            }
        }
    }
}

/// Every element position of a layout, from its own shape, strides and offset (in i128, so
/// this naive walk cannot overflow).
fn every_position(layout: &Layout) -> Vec<i128> {
    let dims = layout.shape().dims();
    let n: usize = dims.iter().product();
    (0..n)
        .map(|mut flat| {
            let mut position = layout.offset() as i128;
            for (&d, &s) in dims.iter().zip(layout.strides()).rev() {
                position += (flat % d) as i128 * s as i128;
                flat /= d;
            }
            position
        })
        .collect()
}
