//! [`Writer`]: a checkpoint written as TensorFlow writes one, and [`merge`] of several
//! into one (`MergeV2Checkpoints`).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use prost::Message;

use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::shape::TensorShape;
use crate::slice::TensorSlice;
use crate::tensor::Tensor;

use super::data::encode_strings;
use super::key::slice_key;
use super::messages::{BundleEntryProto, BundleHeaderProto, BUNDLE_VERSION};
use super::{crc32c, data_path, index_path, table};
use crate::proto::VersionDef;

/// A checkpoint being written: TensorFlow's `BundleWriter` (and `SaveV2`). Tensors go to
/// one data file as they are added; [`Writer::finish`] writes the index. Both files are
/// written under temporary names and renamed into place at the end, so a reader never sees
/// half a checkpoint.
///
/// ```
/// # fn main() -> polytensor_core::Result<()> {
/// # let device = polytensor_cpu::CpuDevice::shared();
/// # let dir = std::env::temp_dir().join(format!("pt-doc-writer-{}", std::process::id()));
/// use polytensor_core::checkpoint::{Reader, Writer};
/// use polytensor_core::Tensor;
/// let prefix = dir.join("ckpt");
/// let mut writer = Writer::new(&prefix)?;
/// writer.add("w", &Tensor::from_slice(&[1.0f32, 2.0], [2], &device)?)?;
/// writer.finish()?;
/// let w = Reader::open(&prefix)?.read("w", &device)?;
/// assert_eq!(w.to_vec::<f32>()?, [1.0, 2.0]);
/// # std::fs::remove_dir_all(dir).ok();
/// # Ok(()) }
/// ```
pub struct Writer {
    prefix: PathBuf,
    data: Option<(BufWriter<File>, PathBuf)>,
    offset: u64,
    entries: BTreeMap<Vec<u8>, BundleEntryProto>,
    /// The whole-tensor entries of partitioned tensors, their slices gathered as added.
    partitioned: BTreeMap<String, BundleEntryProto>,
}

impl Writer {
    /// Start a checkpoint at `prefix`, creating its directory if needed.
    pub fn new(prefix: impl AsRef<Path>) -> Result<Self> {
        let prefix = prefix.as_ref().to_path_buf();
        if let Some(dir) = prefix.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(&dir.display().to_string(), e))?;
        }
        let path = temp_path(&data_path(&prefix, 0, 1));
        let file = File::create(&path).map_err(|e| Error::io(&path.display().to_string(), e))?;
        Ok(Self {
            prefix,
            data: Some((BufWriter::with_capacity(1 << 20, file), path)),
            offset: 0,
            entries: BTreeMap::new(),
            partitioned: BTreeMap::new(),
        })
    }

    /// Save `tensor` under `key` (any device; any order of keys, each once).
    pub fn add(&mut self, key: &str, tensor: &Tensor) -> Result<()> {
        self.check_new_key(key)?;
        if self.partitioned.contains_key(key) {
            return Err(Error::invalid(format!("Adding duplicate key: {key}")));
        }
        let entry = self.write_data(key, tensor)?;
        self.entries.insert(key.as_bytes().to_vec(), entry);
        Ok(())
    }

    /// Save `tensor` as the part `slice` of the tensor `key` of shape `full_shape` (a
    /// partitioned variable, TensorFlow's `AddSlice`): readers assemble the parts.
    pub fn add_slice(
        &mut self,
        key: &str,
        full_shape: &TensorShape,
        slice: &TensorSlice,
        tensor: &Tensor,
    ) -> Result<()> {
        self.check_new_key(key)?;
        let sliced = slice.slice_tensor_shape(full_shape)?;
        if sliced != *tensor.shape() {
            return Err(Error::shape(
                "checkpoint slice",
                format!(
                    "the slice {slice} of {full_shape} has shape {sliced}, but the tensor has \
                     shape {}",
                    tensor.shape()
                ),
            ));
        }
        let whole = self
            .partitioned
            .entry(key.to_string())
            .or_insert_with(|| BundleEntryProto {
                dtype: tensor.dtype().as_i32(),
                shape: Some(full_shape.to_proto()),
                ..Default::default()
            });
        if whole.dtype != tensor.dtype().as_i32() || whole.shape != Some(full_shape.to_proto()) {
            return Err(Error::invalid(format!(
                "the slices of {key} disagree on the dtype or the full shape"
            )));
        }
        let saved = whole
            .slices
            .iter()
            .map(TensorSlice::from_proto)
            .collect::<Result<Vec<_>>>()?;
        if let Some(other) = saved.iter().find(|s| s.overlaps(slice)) {
            return Err(Error::invalid(format!(
                "the slice {slice} of {key} overlaps the slice {other} already added"
            )));
        }
        let slice_key = slice_key(key, slice);
        let entry = self.write_data(key, tensor)?;
        self.partitioned
            .get_mut(key)
            .expect("inserted above")
            .slices
            .push(slice.to_proto());
        self.entries.insert(slice_key, entry);
        Ok(())
    }

    /// Write the index and move both files into place.
    pub fn finish(mut self) -> Result<()> {
        let (data, data_tmp) = self
            .data
            .take()
            .expect("a writer holds its data file until finish");
        let data_what = data_tmp.display().to_string();
        let file = data
            .into_inner()
            .map_err(|e| Error::io(&data_what, e.into_error()))?;
        file.sync_all().map_err(|e| Error::io(&data_what, e))?;
        let mut entries = std::mem::take(&mut self.entries);
        for (key, whole) in std::mem::take(&mut self.partitioned) {
            entries.insert(key.into_bytes(), whole);
        }
        write_index(&index_path(&self.prefix), 1, &entries)?;
        let data_final = data_path(&self.prefix, 0, 1);
        std::fs::rename(&data_tmp, &data_final).map_err(|e| Error::io(&data_what, e))
    }

    fn check_new_key(&self, key: &str) -> Result<()> {
        if key.is_empty() {
            return Err(Error::invalid("a checkpoint key must not be empty"));
        }
        if key.starts_with('\0') {
            return Err(Error::invalid("a checkpoint key must not start with NUL"));
        }
        if self.entries.contains_key(key.as_bytes()) {
            return Err(Error::invalid(format!("Adding duplicate key: {key}")));
        }
        Ok(())
    }

    /// Append the tensor's bytes to the data file; its entry.
    fn write_data(&mut self, key: &str, tensor: &Tensor) -> Result<BundleEntryProto> {
        let (out, path) = self
            .data
            .as_mut()
            .expect("a writer holds its data file until finish");
        let what = || format!("{} (key {key})", path.display());
        let (size, crc) = if tensor.dtype() == DataType::String {
            let (bytes, crc) = encode_strings(&tensor.to_strings()?);
            out.write_all(&bytes).map_err(|e| Error::io(&what(), e))?;
            (bytes.len(), crc)
        } else {
            let copied;
            let bytes = match tensor.host_element_bytes() {
                Some(bytes) => bytes,
                None => {
                    copied = tensor.to_bytes()?;
                    &copied
                }
            };
            out.write_all(bytes).map_err(|e| Error::io(&what(), e))?;
            (bytes.len(), crc32c::crc32c_parallel(bytes))
        };
        let entry = BundleEntryProto {
            dtype: tensor.dtype().as_i32(),
            shape: Some(tensor.shape().to_proto()),
            shard_id: 0,
            offset: self.offset as i64,
            size: size as i64,
            crc32c: crc32c::mask(crc),
            slices: Vec::new(),
        };
        self.offset += size as u64;
        Ok(entry)
    }
}

impl Drop for Writer {
    /// A writer dropped before [`Writer::finish`] removes its temporary data file.
    fn drop(&mut self) {
        if let Some((_, path)) = self.data.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Merge the checkpoints at `prefixes` (each written by one [`Writer`], say one per device)
/// into one at `output` with a data file per input: TensorFlow's `MergeV2Checkpoints`.
/// The inputs' data files are moved, and their indexes removed; keys must be unique
/// across them. With `delete_old_dirs`, the inputs' directories are removed when empty.
pub fn merge(
    prefixes: &[impl AsRef<Path>],
    output: impl AsRef<Path>,
    delete_old_dirs: bool,
) -> Result<()> {
    let output = output.as_ref();
    let num_shards = prefixes.len();
    if num_shards == 0 {
        return Err(Error::invalid("no checkpoints to merge"));
    }
    if let Some(dir) = output.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(&dir.display().to_string(), e))?;
    }
    let mut entries = BTreeMap::new();
    for (shard, prefix) in prefixes.iter().enumerate() {
        let index = index_path(prefix.as_ref());
        let what = index.display().to_string();
        let bytes = std::fs::read(&index).map_err(|e| Error::io(&what, e))?;
        let mut rows = table::read_table(&bytes, &what)?.into_iter();
        let header = rows
            .next()
            .filter(|(k, _)| k.is_empty())
            .and_then(|(_, v)| BundleHeaderProto::decode(v.as_slice()).ok())
            .ok_or_else(|| Error::DataLoss(format!("{what}: no header entry")))?;
        if header.num_shards != 1 {
            return Err(Error::invalid(format!(
                "{what} has {} shards; only single-shard checkpoints merge",
                header.num_shards
            )));
        }
        for (key, value) in rows {
            let mut entry = BundleEntryProto::decode(value.as_slice())
                .map_err(|e| Error::DataLoss(format!("{what}: {e}")))?;
            entry.shard_id = shard as i32;
            match entries.get_mut(&key) {
                None => {
                    entries.insert(key, entry);
                }
                // A partitioned tensor's parts saved by several writers: one entry listing
                // all the slices, as TensorFlow merges them.
                Some(whole)
                    if !whole.slices.is_empty()
                        && !entry.slices.is_empty()
                        && whole.dtype == entry.dtype
                        && whole.shape == entry.shape =>
                {
                    whole.slices.extend(entry.slices);
                }
                Some(_) => {
                    return Err(Error::invalid(format!(
                        "Duplicate key: {} in the checkpoints being merged",
                        String::from_utf8_lossy(&key)
                    )));
                }
            }
        }
    }
    for (shard, prefix) in prefixes.iter().enumerate() {
        let from = data_path(prefix.as_ref(), 0, 1);
        std::fs::rename(&from, data_path(output, shard, num_shards))
            .map_err(|e| Error::io(&from.display().to_string(), e))?;
    }
    write_index(&index_path(output), num_shards, &entries)?;
    for prefix in prefixes {
        let prefix = prefix.as_ref();
        let index = index_path(prefix);
        std::fs::remove_file(&index).map_err(|e| Error::io(&index.display().to_string(), e))?;
        if delete_old_dirs {
            if let Some(dir) = prefix.parent().filter(|d| !d.as_os_str().is_empty()) {
                // Only an empty directory goes, as TensorFlow's `DeleteRecursively` of a
                // merged part's directory leaves other files alone.
                let _ = std::fs::remove_dir(dir);
            }
        }
    }
    Ok(())
}

/// Write an index holding the header and `entries`, under a temporary name then renamed.
fn write_index(
    path: &Path,
    num_shards: usize,
    entries: &BTreeMap<Vec<u8>, BundleEntryProto>,
) -> Result<()> {
    let header = BundleHeaderProto {
        num_shards: num_shards as i32,
        endianness: 0,
        version: Some(VersionDef {
            producer: BUNDLE_VERSION,
            ..Default::default()
        }),
    };
    let mut table = table::TableWriter::new();
    table.add(b"", &header.encode_to_vec())?;
    for (key, entry) in entries {
        table.add(key, &entry.encode_to_vec())?;
    }
    let tmp = temp_path(path);
    let what = tmp.display().to_string();
    std::fs::write(&tmp, table.finish()).map_err(|e| Error::io(&what, e))?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io(&what, e))
}

/// `path` with TensorFlow's `.tempstate` suffix and a number no other writer uses.
fn temp_path(path: &Path) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let unique = NEXT.fetch_add(1, Ordering::Relaxed);
    let mut name = path.as_os_str().to_os_string();
    name.push(format!(".tempstate{}-{unique}", std::process::id()));
    PathBuf::from(name)
}
