//! Any string as a `TensorSlice`: parsing is an `Ok` or an `Err`, never a panic; what
//! parses prints its canonical form, which parses back to the same slice, as does its
//! proto; and slicing a shape with it is an `Ok` or an `Err`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use polytensor_core::{TensorShape, TensorSlice};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(slice) = text.parse::<TensorSlice>() else {
        return;
    };
    let canonical = slice.to_string();
    assert_eq!(canonical.parse::<TensorSlice>().unwrap(), slice, "{text:?}");
    assert_eq!(TensorSlice::from_proto(&slice.to_proto()).unwrap(), slice);
    assert_eq!(slice.intersect(&slice).unwrap(), Some(slice.clone()));
    let dims: Vec<usize> = slice
        .extents()
        .iter()
        .map(|e| e.end().unwrap_or(3) as usize)
        .collect();
    if let Ok(shape) = TensorShape::new(&dims) {
        let sliced = slice
            .slice_tensor_shape(&shape)
            .expect("a slice fits the shape it ends at");
        assert_eq!(sliced.rank(), slice.rank());
    }
});
