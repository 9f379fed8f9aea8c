//! `TensorShape` is heap-free for rank <= 6: checked with a counting global allocator.

use polytensor_core::TensorShape;

use crate::counting::allocations_during;

#[test]
fn shapes_up_to_rank_6_never_touch_the_heap() {
    assert!(std::mem::size_of::<TensorShape>() <= 32);
    let count = allocations_during(|| {
        let mut shape = TensorShape::new(&[2, 3, 4, 5, 6, 7]).unwrap();
        let copy = shape.clone();
        assert_eq!(shape.num_elements(), 5040);
        assert_eq!(shape.dims().len(), 6);
        shape.set_dim(0, 9).unwrap();
        shape.remove_dim(5).unwrap();
        shape.insert_dim(0, 1 << 31).unwrap();
        shape.remove_last_dims(2).unwrap();
        let joined = shape.concatenate(&TensorShape::new(&[2]).unwrap()).unwrap();
        let signed = TensorShape::from_i64(&[4, 5, 6]).unwrap();
        assert!(copy.is_same_size(&TensorShape::new(&[2, 3, 4, 5, 6, 7]).unwrap()));
        std::hint::black_box((shape, copy, joined, signed));
    });
    assert_eq!(
        count, 0,
        "building, cloning, querying and editing rank <= 6 shapes allocated"
    );
    let heap = allocations_during(|| {
        std::hint::black_box(TensorShape::new(&[1, 2, 3, 4, 5, 6, 7]).unwrap());
    });
    assert!(heap >= 1, "rank 7 lives on the heap");
}
