//! What a collective's tensors must be and what it gives back, the same on MPI and NCCL:
//! fixed-size elements, a broadcast's root, and the shapes of a split (reduce-scatter,
//! all-to-all) and of a gather.

use polytensor_core::{DataType, Error, Result, TensorShape};

/// An `Err` for dtypes without fixed-size elements (strings, variants, resources).
pub(crate) fn check_pod(dtype: DataType, name: &str) -> Result<()> {
    if dtype.is_pod() {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{name} moves fixed-size elements, not {dtype}"
        )))
    }
}

/// `root` if it is a rank of a communicator of `size`, else an `Err`.
pub(crate) fn check_root(root: usize, size: usize) -> Result<usize> {
    if root < size {
        Ok(root)
    } else {
        Err(Error::invalid(format!(
            "broadcast from rank {root} of a communicator of {size} ranks"
        )))
    }
}

/// `shape`'s first dim split over `size` ranks: the chunk's shape, or an `Err`.
pub(crate) fn chunk_shape(shape: &TensorShape, size: usize, name: &str) -> Result<TensorShape> {
    let dims = shape.dims();
    match dims.first() {
        Some(&d0) if d0 % size == 0 => {
            let mut chunk = dims.to_vec();
            chunk[0] = d0 / size;
            TensorShape::new(&chunk)
        }
        _ => Err(Error::invalid(format!(
            "{name} splits the first dim over the {size} ranks; {shape} does not split evenly"
        ))),
    }
}

/// The shape of `size` tensors of `shape` concatenated along the first dim (a scalar
/// gathers into a vector).
pub(crate) fn gathered_shape(shape: &TensorShape, size: usize) -> Result<TensorShape> {
    let mut dims = shape.dims().to_vec();
    match dims.first_mut() {
        Some(first) => {
            *first = first.checked_mul(size).ok_or_else(|| {
                Error::invalid(format!("gathering {size} tensors of {shape} overflows"))
            })?
        }
        None => dims.push(size),
    }
    TensorShape::new(&dims)
}
