//! `SparseTensor` on the CPU: bad components and indices are errors with TensorFlow's
//! messages, and the conversions keep what TensorFlow keeps (`-0.0` is zero, NaN is not,
//! defaults, strings, storage-only dtypes). tests/sparse_tensorflow.rs checks values against
//! TensorFlow itself on every device.

use std::sync::Arc;

use polytensor_core::sparse::{IndexOrder, SparseTensor};
use polytensor_core::{DataType, Device, Scalar, Tensor};
use polytensor_cpu::CpuDevice;

fn cpu() -> Arc<dyn Device> {
    CpuDevice::shared()
}

fn ints(values: &[i64], dims: &[usize]) -> Tensor {
    Tensor::from_slice(values, dims, &cpu()).unwrap()
}

fn message(result: polytensor_core::Result<impl Sized>) -> String {
    match result {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn components_are_checked_as_tensorflow_checks_them() {
    let values = Tensor::from_slice(&[1.0f32, 2.0], [2], &cpu()).unwrap();
    let shape = ints(&[3, 4], &[2]);
    let bad_count = SparseTensor::new(
        ints(&[0, 0, 1, 1, 2, 2], &[3, 2]),
        values.clone(),
        shape.clone(),
    );
    assert!(
        message(bad_count).contains("Number of elements in index (3) and values (2) do not match.")
    );
    let bad_rank = SparseTensor::new(
        ints(&[0, 0, 0, 1, 1, 1], &[2, 3]),
        values.clone(),
        shape.clone(),
    );
    assert!(message(bad_rank).contains("Index rank (3) and shape rank (2) do not match."));
    let not_matrix = SparseTensor::new(ints(&[0, 1], &[2]), values.clone(), shape.clone());
    assert!(message(not_matrix).contains("should be a matrix"));
    let int32 = Tensor::from_slice(&[0i32, 1, 2, 3], [2, 2], &cpu()).unwrap();
    assert!(message(SparseTensor::new(int32, values.clone(), shape)).contains("int64"));
    let negative = SparseTensor::new(ints(&[0, 0, 1, 1], &[2, 2]), values, ints(&[3, -4], &[2]));
    assert!(message(negative).contains("negative"));
}

#[test]
fn indices_are_validated_with_tensorflows_messages() {
    let values = Tensor::from_slice(&[1i32, 2, 3], [3], &cpu()).unwrap();
    let make = |indices: &[i64]| {
        SparseTensor::new(ints(indices, &[3, 2]), values.clone(), ints(&[3, 4], &[2])).unwrap()
    };
    let outside = make(&[0, 0, 1, 4, 2, 0]);
    assert!(message(outside.validate(IndexOrder::Any))
        .contains("indices[1] = [1,4] is out of bounds: need 0 <= index < [3,4]"));
    assert!(message(make(&[0, 0, 1, -1, 2, 0]).to_dense(None)).contains("out of bounds"));
    let unsorted = make(&[1, 0, 0, 3, 2, 0]);
    unsorted.validate(IndexOrder::Any).unwrap();
    assert!(message(unsorted.validate(IndexOrder::Canonical))
        .contains("indices[1] = [0,3] is out of order"));
    let repeated = make(&[0, 1, 0, 1, 2, 0]);
    assert!(message(repeated.to_dense(None)).contains("indices[1] = [0,1] is repeated"));
    // reorder sorts (stable for repeats) and checks bounds only.
    let sorted = unsorted.reorder().unwrap();
    assert_eq!(
        sorted.indices().to_vec::<i64>().unwrap(),
        vec![0, 3, 1, 0, 2, 0]
    );
    assert_eq!(sorted.values().to_vec::<i32>().unwrap(), vec![2, 1, 3]);
    assert!(message(outside.reorder()).contains("out of bounds"));
    // Sparse + sparse refuses an index outside the shape on either side (TensorFlow's
    // kernel would merge it into the sum).
    let inside = make(&[0, 0, 1, 0, 2, 0]);
    for sum in [outside.add(&inside, 0.0), inside.add(&outside, 0.0)] {
        assert!(message(sum).contains("indices[1] = [1,4] is out of bounds"));
    }
    // A default the values' dtype cannot hold is refused, not truncated.
    for default in [
        Scalar::F64(0.5),
        Scalar::I64(1 << 40),
        Scalar::F64(f64::NAN),
    ] {
        let refused = message(inside.to_dense(Some(default)));
        assert!(refused.contains("Expected int32, but got"), "{refused}");
        assert!(message(
            inside
                .fill_empty_rows(default)
                .map(|(s, _)| s.values().clone())
        )
        .contains("Expected int32"));
    }
    // Rows beyond what the host can count are an `Err`, not an abort.
    let huge = SparseTensor::new(
        ints(&[0, 0], &[1, 2]),
        Tensor::from_slice(&[1i32], [1], &cpu()).unwrap(),
        ints(&[1 << 61, 2], &[2]),
    )
    .unwrap();
    let refused = message(
        huge.fill_empty_rows(Scalar::I64(0))
            .map(|(s, _)| s.values().clone()),
    );
    assert!(refused.contains("out of memory"), "{refused}");
    let dense = inside.to_dense(Some(Scalar::F64(-2.0))).unwrap();
    assert_eq!(dense.to_vec::<i32>().unwrap()[1], -2);
}

#[test]
fn conversions_keep_what_tensorflow_keeps() {
    let dense = Tensor::from_slice(&[0.0f32, -0.0, f32::NAN, 2.5], [2, 2], &cpu()).unwrap();
    let sparse = SparseTensor::from_dense(&dense).unwrap();
    assert_eq!(sparse.indices().to_vec::<i64>().unwrap(), vec![1, 0, 1, 1]);
    assert_eq!(sparse.nnz(), 2);
    let back = sparse.to_dense(Some(Scalar::F64(7.0))).unwrap();
    let back = back.to_vec::<f32>().unwrap();
    assert_eq!((back[0], back[1], back[3]), (7.0, 7.0, 2.5));
    assert!(back[2].is_nan());
    // Strings: the empty string is zero, and is the only default.
    let words = Tensor::from_strings(["", "a", "bc"], [3], &cpu()).unwrap();
    let sparse = SparseTensor::from_dense(&words).unwrap();
    assert_eq!(
        sparse.values().to_strings().unwrap(),
        vec![b"a".to_vec(), b"bc".to_vec()]
    );
    assert_eq!(
        sparse.to_dense(None).unwrap().to_strings().unwrap(),
        words.to_strings().unwrap()
    );
    assert!(message(sparse.to_dense(Some(Scalar::I64(1)))).contains("empty string"));
    // Storage-only dtypes convert by their bytes.
    let f8 = Tensor::from_slice(&[0.0f32, 1.5], [2], &cpu())
        .unwrap()
        .cast(DataType::Float8E4M3FN)
        .unwrap();
    let sparse = SparseTensor::from_dense(&f8).unwrap();
    assert_eq!((sparse.nnz(), sparse.dtype()), (1, DataType::Float8E4M3FN));
    // Rank 0 and empty tensors.
    let scalar = SparseTensor::from_dense(&Tensor::scalar(3i64, &cpu()).unwrap()).unwrap();
    assert_eq!((scalar.rank(), scalar.nnz()), (0, 1));
    assert_eq!(
        scalar.to_dense(None).unwrap().to_vec::<i64>().unwrap(),
        vec![3]
    );
    let empty =
        SparseTensor::from_dense(&Tensor::zeros([0, 5], DataType::Int32, &cpu()).unwrap()).unwrap();
    assert_eq!(empty.nnz(), 0);
    assert_eq!(empty.to_dense(None).unwrap().dims().as_slice(), &[0, 5]);
}
