//! Checkpoints in TensorFlow's tensor bundle format (V2): the `PREFIX.index` +
//! `PREFIX.data-NNNNN-of-MMMMM` files that `tf.train.Checkpoint`, `tf.compat.v1.train.Saver`
//! and SavedModels' `variables/` hold, read and written byte-compatible with TensorFlow.
//!
//! - [`Reader`]: open a checkpoint, list its keys ([`Entry`]: dtype, shape, saved slices),
//!   read a tensor or any slice of one onto a device. Partitioned tensors are assembled from
//!   only the saved slices a read needs. Every checksum is checked; a mismatch is an
//!   [`Error::DataLoss`](crate::Error::DataLoss) naming the file and key.
//! - [`Writer`]: save tensors (and slices of partitioned ones); [`merge`] joins checkpoints
//!   written per device into one sharded checkpoint, as `MergeV2Checkpoints` does.
//!
//! The format: the index is a LevelDB table (`table`) whose empty key holds a
//! `BundleHeaderProto` and whose other keys hold one `BundleEntryProto` each (dtype, shape,
//! shard, offset, size, masked CRC-32C); a partitioned tensor's slices lie under keys in
//! TensorFlow's `OrderedCode` (`key`). Data files hold numeric tensors as little-endian
//! bytes, back to back, and strings as varint lengths, a masked CRC of the lengths, then the
//! bytes (`data`).

mod crc32c;
mod data;
mod key;
mod messages;
mod reader;
mod table;
mod writer;

use std::path::{Path, PathBuf};

pub use crc32c::{crc32c, crc32c_parallel, mask as mask_crc, unmask as unmask_crc};
pub use messages::{BundleEntryProto, BundleHeaderProto};
pub use reader::{Entry, Reader};
pub use writer::{merge, Writer};

/// The index file of the checkpoint at `prefix`: `PREFIX.index`.
pub fn index_path(prefix: &Path) -> PathBuf {
    with_suffix(prefix, ".index")
}

/// Data file `shard` of `num_shards` of the checkpoint at `prefix`:
/// `PREFIX.data-00000-of-00001` (TensorFlow's `DataFilename`).
pub fn data_path(prefix: &Path, shard: usize, num_shards: usize) -> PathBuf {
    with_suffix(prefix, &format!(".data-{shard:05}-of-{num_shards:05}"))
}

/// `BASENAME-00000-of-00002`: TensorFlow's `ShardedFilename`, the name of one shard's
/// part of a checkpoint before [`merge`].
pub fn sharded_filename(basename: &str, shard: usize, num_shards: usize) -> String {
    format!("{basename}-{shard:05}-of-{num_shards:05}")
}

fn with_suffix(prefix: &Path, suffix: &str) -> PathBuf {
    let mut name = prefix.as_os_str().to_os_string();
    name.push(suffix);
    PathBuf::from(name)
}

/// A `shape_and_slices` spec of `SaveV2` / `RestoreV2` (TensorFlow's
/// `ParseShapeAndSlice`): `""` for a whole tensor (`None`), or the full shape's dims then a
/// [`TensorSlice`](crate::TensorSlice), space-separated (`"7 5 0,3:-"`).
pub fn parse_shape_and_slice(
    spec: &str,
) -> crate::Result<Option<(crate::TensorShape, crate::TensorSlice)>> {
    if spec.is_empty() {
        return Ok(None);
    }
    let bad = |why: String| crate::Error::invalid(format!("shape_and_slice spec {spec:?}: {why}"));
    let mut parts: Vec<&str> = spec.split(' ').collect();
    let slice: crate::TensorSlice = parts
        .pop()
        .unwrap_or_default()
        .parse()
        .map_err(|e: crate::Error| bad(e.to_string()))?;
    let dims = parts
        .iter()
        .map(|d| {
            d.parse::<usize>()
                .map_err(|_| bad(format!("{d:?} is not a dimension")))
        })
        .collect::<crate::Result<Vec<_>>>()?;
    if dims.len() != slice.rank() {
        return Err(bad(format!(
            "Expected {} slice dimensions for a shape of rank {}",
            dims.len(),
            dims.len()
        )));
    }
    let shape = crate::TensorShape::new(&dims)?;
    slice
        .slice_tensor_shape(&shape)
        .map_err(|e| bad(e.to_string()))?;
    Ok(Some((shape, slice)))
}
