//! [`Reader`]: a checkpoint's index, and its tensors read onto any device.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use prost::Message;

use crate::device::Device;
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::shape::TensorShape;
use crate::slice::{Extent, TensorSlice};
use crate::tensor::{check_element_slice, Tensor};

use super::data::{decode_strings, map, read_checksummed};
use super::key::{is_slice_key, slice_key};
use super::messages::{BundleEntryProto, BundleHeaderProto, BUNDLE_VERSION};
use super::{crc32c, data_path, index_path, table};

/// Entries at least this large are mapped rather than read: on the CPU their tensors share
/// the page cache (no copy); other devices copy from the mapping (one copy, no staging).
/// Smaller ones cost less to read than to map.
const MAP_AT_LEAST: u64 = 1 << 20;

/// A checkpoint opened for reading: TensorFlow's `BundleReader` (and
/// `tf.train.load_checkpoint`). Opening reads the index; each tensor is read when asked
/// for, straight into the memory of the device it goes to, its checksum checked.
///
/// ```no_run
/// # fn main() -> polytensor_core::Result<()> {
/// # let device = polytensor_cpu::CpuDevice::shared();
/// use polytensor_core::checkpoint::Reader;
/// let reader = Reader::open("/tmp/model/ckpt")?;
/// for (key, entry) in reader.entries() {
///     println!("{key}: {} {}", entry.dtype(), entry.shape());
/// }
/// let kernel = reader.read("dense/kernel", &device)?;
/// let rows = reader.read_slice("emb", &"0,3:-".parse()?, &device)?;
/// # Ok(()) }
/// ```
pub struct Reader {
    prefix: PathBuf,
    entries: BTreeMap<String, Entry>,
    /// The saved slices of partitioned tensors, by their encoded keys.
    slices: HashMap<Vec<u8>, Location>,
    /// How many data files the header says there are.
    num_shards: usize,
    /// The data files opened so far, by shard (opened on first use: a header may claim
    /// any number of shards).
    files: Mutex<HashMap<usize, Arc<File>>>,
}

/// What a checkpoint holds under one key: a tensor's dtype and shape, and for a
/// partitioned tensor the slices saved of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    dtype: DataType,
    shape: TensorShape,
    slices: Vec<TensorSlice>,
    location: Location,
}

/// Where an entry's bytes lie, and their masked checksum.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Location {
    shard: usize,
    offset: u64,
    size: u64,
    masked_crc: u32,
}

impl Entry {
    /// The element dtype.
    pub fn dtype(&self) -> DataType {
        self.dtype
    }

    /// The shape (of the whole tensor, for a partitioned one).
    pub fn shape(&self) -> &TensorShape {
        &self.shape
    }

    /// The slices saved of a partitioned tensor (TensorFlow's `SaveSliceInfo`), each under
    /// its own key; empty for a tensor saved whole.
    pub fn slices(&self) -> &[TensorSlice] {
        &self.slices
    }
}

impl Reader {
    /// Open the checkpoint at `prefix` (the path without `.index`): read and check its
    /// index. A missing index is an [`Error::NotFound`]; a corrupt one an
    /// [`Error::DataLoss`] naming the file.
    pub fn open(prefix: impl AsRef<Path>) -> Result<Self> {
        let prefix = prefix.as_ref().to_path_buf();
        let index = index_path(&prefix);
        let what = index.display().to_string();
        let bytes = std::fs::read(&index).map_err(|e| Error::io(&what, e))?;
        let mut rows = table::read_table(&bytes, &what)?.into_iter();
        let corrupt = |why: String| Error::DataLoss(format!("{what}: {why}"));
        let header = match rows.next() {
            Some((key, value)) if key.is_empty() => BundleHeaderProto::decode(value.as_slice())
                .map_err(|e| corrupt(format!("bad header: {e}")))?,
            _ => return Err(corrupt("no header entry under the empty key".into())),
        };
        let num_shards = check_header(&header).map_err(corrupt)?;
        let mut entries = BTreeMap::new();
        let mut slices = HashMap::new();
        for (key, value) in rows {
            let name = String::from_utf8_lossy(&key).into_owned();
            let proto = BundleEntryProto::decode(value.as_slice())
                .map_err(|e| corrupt(format!("bad entry for key {name:?}: {e}")))?;
            let entry = check_entry(&proto, num_shards)
                .map_err(|e| corrupt(format!("bad entry for key {name:?}: {e}")))?;
            if is_slice_key(&key) {
                slices.insert(key, entry.location);
            } else {
                entries.insert(name, entry);
            }
        }
        Ok(Self {
            prefix,
            entries,
            slices,
            num_shards,
            files: Mutex::new(HashMap::new()),
        })
    }

    /// The prefix the checkpoint was opened at.
    pub fn prefix(&self) -> &Path {
        &self.prefix
    }

    /// The number of data files.
    pub fn num_shards(&self) -> usize {
        self.num_shards
    }

    /// Every key with its entry, in key order (the saved slices of partitioned tensors are
    /// listed under their tensor's key, not on their own).
    pub fn entries(&self) -> impl Iterator<Item = (&str, &Entry)> {
        self.entries.iter().map(|(k, e)| (k.as_str(), e))
    }

    /// Whether the checkpoint holds `key`.
    pub fn contains(&self, key: &str) -> bool {
        self.entries.contains_key(key)
    }

    /// The entry of `key`; TensorFlow's [`Error::NotFound`] when there is none.
    pub fn entry(&self, key: &str) -> Result<&Entry> {
        self.entries
            .get(key)
            .ok_or_else(|| Error::NotFound(format!("Key {key} not found in checkpoint")))
    }

    /// The tensor saved under `key`, on `device` (a partitioned tensor assembled from its
    /// slices). String tensors live on host devices only.
    pub fn read(&self, key: &str, device: &Arc<dyn Device>) -> Result<Tensor> {
        let entry = self.entry(key)?;
        if entry.slices.is_empty() {
            return self.read_whole(key, entry.dtype, &entry.shape, entry.location, device);
        }
        self.read_slice(key, &TensorSlice::covering(&entry.shape), device)
    }

    /// The part `slice` of the tensor saved under `key`, on `device` (TensorFlow's
    /// `RestoreV2` with a `shape_and_slices` spec). Of a partitioned tensor only the saved
    /// slices that overlap `slice` are read; they must cover it.
    pub fn read_slice(
        &self,
        key: &str,
        slice: &TensorSlice,
        device: &Arc<dyn Device>,
    ) -> Result<Tensor> {
        let entry = self.entry(key)?;
        let want = Region::new(slice, &entry.shape).map_err(|why| {
            Error::InvalidSlice(format!(
                "the slice {slice} does not fit {key}'s shape {}: {why}",
                entry.shape
            ))
        })?;
        let out_shape = TensorShape::new(&want.lengths())?;
        if entry.slices.is_empty() {
            if want.is_whole(&entry.shape) {
                return self.read_whole(key, entry.dtype, &entry.shape, entry.location, device);
            }
            let whole = Region::whole(&entry.shape);
            let source = self.read_host(key, entry.dtype, &whole, entry.location)?;
            let mut out = HostElements::new(entry.dtype, want.num_elements())?;
            out.copy_region(&source, &whole, &want, &want);
            return out.into_tensor(out_shape, entry.dtype, device);
        }
        // The saved slices that overlap the request, checked before anything is allocated:
        // each saved, of its size within its file; disjoint; covering the request.
        let mut parts = Vec::new();
        for saved in &entry.slices {
            let part = Region::new(saved, &entry.shape).map_err(Error::InvalidSlice)?;
            let Some(overlap) = part.intersect(&want) else {
                continue;
            };
            let location = *self.slices.get(&slice_key(key, saved)).ok_or_else(|| {
                Error::DataLoss(format!(
                    "{}: the slice {saved} of {key} is listed but not saved",
                    index_path(&self.prefix).display()
                ))
            })?;
            let what = format!("{key} (slice {saved})");
            if entry.dtype != DataType::String {
                self.check_size(&what, entry.dtype, part.num_elements(), location)?;
            }
            self.check_extent(&what, location)?;
            parts.push((what, part, overlap, location));
        }
        let covered: usize = parts.iter().map(|p| p.2.num_elements()).sum();
        let disjoint = parts
            .iter()
            .enumerate()
            .all(|(i, a)| parts[i + 1..].iter().all(|b| a.1.intersect(&b.1).is_none()));
        if !disjoint {
            return Err(Error::DataLoss(format!(
                "{}: the saved slices of {key} overlap",
                index_path(&self.prefix).display()
            )));
        }
        if covered != want.num_elements() {
            return Err(Error::NotFound(format!(
                "Does not have sufficient slices for partitioned tensor {key} to restore in \
                 slice_spec: {slice}"
            )));
        }
        let mut out = HostElements::new(entry.dtype, want.num_elements())?;
        for (what, part, overlap, location) in &parts {
            let source = self.read_host(what, entry.dtype, part, *location)?;
            out.copy_region(&source, part, &want, overlap);
        }
        out.into_tensor(out_shape, entry.dtype, device)
    }

    /// A tensor saved whole, read straight into `device`'s memory.
    fn read_whole(
        &self,
        key: &str,
        dtype: DataType,
        shape: &TensorShape,
        location: Location,
        device: &Arc<dyn Device>,
    ) -> Result<Tensor> {
        if dtype == DataType::String {
            let region = Region::whole(shape);
            return self.read_host(key, dtype, &region, location)?.into_tensor(
                shape.clone(),
                dtype,
                device,
            );
        }
        self.check_size(key, dtype, shape.num_elements(), location)?;
        self.check_extent(key, location)?;
        let file = self.file(location.shard)?;
        if location.size >= MAP_AT_LEAST {
            if let Some(mapped) = map(&file, location.offset, host_len(location.size)?) {
                let bytes = mapped.map_err(|e| self.read_error(location.shard, key, e))?;
                self.check_crc(key, location, crc32c::crc32c_parallel(&bytes))?;
                check_element_slice(dtype, &bytes)?;
                return Tensor::from_shared_bytes(bytes, shape.clone(), dtype, device);
            }
        }
        let mut crc = 0;
        let tensor = Tensor::from_filled_bytes(shape.clone(), dtype, device, |bytes| {
            crc = read_checksummed(&file, location.offset, bytes)
                .map_err(|e| self.read_error(location.shard, key, e))?;
            Ok(())
        })?;
        self.check_crc(key, location, crc)?;
        Ok(tensor)
    }

    /// The elements of one saved entry, read to the host and checked.
    fn read_host(
        &self,
        key: &str,
        dtype: DataType,
        region: &Region,
        location: Location,
    ) -> Result<HostElements> {
        let count = region.num_elements();
        self.check_extent(key, location)?;
        let file = self.file(location.shard)?;
        if dtype == DataType::String {
            let mut bytes =
                crate::alloc::host_vec(host_len(location.size)?, 0u8, "a checkpoint read")?;
            read_checksummed(&file, location.offset, &mut bytes)
                .map_err(|e| self.read_error(location.shard, key, e))?;
            let what = format!("{} (key {key})", self.data_file(location.shard));
            let (strings, crc) = decode_strings(&bytes, count, &what)?;
            self.check_crc(key, location, crc)?;
            return Ok(HostElements::Strings(strings));
        }
        self.check_size(key, dtype, count, location)?;
        let mut bytes = crate::alloc::host_vec(host_len(location.size)?, 0u8, "a checkpoint read")?;
        let crc = read_checksummed(&file, location.offset, &mut bytes)
            .map_err(|e| self.read_error(location.shard, key, e))?;
        self.check_crc(key, location, crc)?;
        Ok(HostElements::Bytes {
            bytes,
            size: dtype.size(),
        })
    }

    fn check_size(
        &self,
        key: &str,
        dtype: DataType,
        count: usize,
        location: Location,
    ) -> Result<()> {
        let want = (count as u64).checked_mul(dtype.size() as u64);
        if want != Some(location.size) {
            return Err(Error::DataLoss(format!(
                "{}: the entry for {key} holds {} bytes, not the {} bytes of {count} {dtype} \
                 elements",
                index_path(&self.prefix).display(),
                location.size,
                want.map_or("overflowing".into(), |w| w.to_string())
            )));
        }
        Ok(())
    }

    fn check_crc(&self, key: &str, location: Location, crc: u32) -> Result<()> {
        let stored = crc32c::unmask(location.masked_crc);
        if stored != crc {
            return Err(Error::DataLoss(format!(
                "Checksum does not match: stored {stored} vs. calculated on the restored bytes \
                 {crc} (key {key} in {})",
                self.data_file(location.shard)
            )));
        }
        Ok(())
    }

    /// `Err` unless the entry's bytes lie within its data file: checked before memory is
    /// set aside for them, so that an index cannot make a reader allocate what the files
    /// do not hold.
    fn check_extent(&self, key: &str, location: Location) -> Result<()> {
        let file = self.file(location.shard)?;
        let len = file
            .metadata()
            .map_err(|e| Error::io(&self.data_file(location.shard), e))?
            .len();
        match location.offset.checked_add(location.size) {
            Some(end) if end <= len => Ok(()),
            _ => Err(Error::DataLoss(format!(
                "{} (key {key}): the file ends at byte {len}, before the entry's {} bytes at \
                 offset {}",
                self.data_file(location.shard),
                location.size,
                location.offset
            ))),
        }
    }

    /// Data file `shard`, opened on first use.
    fn file(&self, shard: usize) -> Result<Arc<File>> {
        let mut files = self.files.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(file) = files.get(&shard) {
            return Ok(file.clone());
        }
        let path = data_path(&self.prefix, shard, self.num_shards);
        let file =
            Arc::new(File::open(&path).map_err(|e| Error::io(&path.display().to_string(), e))?);
        files.insert(shard, file.clone());
        Ok(file)
    }

    fn data_file(&self, shard: usize) -> String {
        data_path(&self.prefix, shard, self.num_shards)
            .display()
            .to_string()
    }

    fn read_error(&self, shard: usize, key: &str, e: std::io::Error) -> Error {
        let what = format!("{} (key {key})", self.data_file(shard));
        match e.kind() {
            std::io::ErrorKind::UnexpectedEof => {
                Error::DataLoss(format!("{what}: the file ends before the entry's bytes"))
            }
            _ => Error::io(&what, e),
        }
    }
}

/// The number of shards, or why the header is refused (TensorFlow's version checks).
fn check_header(header: &BundleHeaderProto) -> Result<usize, String> {
    if header.endianness != 0 {
        return Err("the checkpoint is big-endian; polytensor reads little-endian ones".into());
    }
    let version = header.version.clone().unwrap_or_default();
    if version.min_consumer > BUNDLE_VERSION {
        return Err(format!(
            "Checkpoint min consumer version {} above current version {BUNDLE_VERSION} for \
             TensorFlow",
            version.min_consumer
        ));
    }
    if version.bad_consumers.contains(&BUNDLE_VERSION) {
        return Err(format!(
            "Checkpoint disallows consumer version {BUNDLE_VERSION}"
        ));
    }
    usize::try_from(header.num_shards)
        .ok()
        .filter(|&n| n >= 1)
        .ok_or_else(|| format!("bad number of shards {}", header.num_shards))
}

/// An entry checked: a known dtype, a valid shape and slices, a shard that exists.
fn check_entry(proto: &BundleEntryProto, num_shards: usize) -> Result<Entry, String> {
    let dtype = DataType::from_i32(proto.dtype).map_err(|e| e.to_string())?;
    if !dtype.is_pod() && dtype != DataType::String {
        return Err(format!("{dtype} tensors cannot be read from a checkpoint"));
    }
    let shape = match &proto.shape {
        Some(shape) => TensorShape::from_proto(shape).map_err(|e| e.to_string())?,
        None => TensorShape::scalar(),
    };
    let shard = usize::try_from(proto.shard_id)
        .ok()
        .filter(|&s| s < num_shards)
        .ok_or_else(|| format!("shard {} of {num_shards}", proto.shard_id))?;
    let (offset, size) = match (u64::try_from(proto.offset), u64::try_from(proto.size)) {
        (Ok(o), Ok(s)) if o.checked_add(s).is_some() => (o, s),
        _ => return Err(format!("offset {} and size {}", proto.offset, proto.size)),
    };
    let slices = proto
        .slices
        .iter()
        .map(|s| {
            let slice = TensorSlice::from_proto(s).map_err(|e| e.to_string())?;
            Region::new(&slice, &shape)?;
            Ok(slice)
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Entry {
        dtype,
        shape,
        slices,
        location: Location {
            shard,
            offset,
            size,
            masked_crc: proto.crc32c,
        },
    })
}

fn host_len(size: u64) -> Result<usize> {
    usize::try_from(size).map_err(|_| Error::invalid(format!("{size} bytes do not fit in memory")))
}

/// A hyper-rectangle of a tensor with every extent resolved: a start and a length per
/// dimension.
#[derive(Debug, Clone, PartialEq)]
struct Region {
    bounds: Vec<(usize, usize)>,
}

impl Region {
    /// `slice` resolved against `shape`, or why it does not fit.
    fn new(slice: &TensorSlice, shape: &TensorShape) -> Result<Self, String> {
        if slice.rank() != shape.rank() {
            return Err(format!(
                "a slice of rank {} for a shape of rank {}",
                slice.rank(),
                shape.rank()
            ));
        }
        let bounds = slice
            .extents()
            .iter()
            .zip(shape.iter())
            .map(|(extent, dim)| match *extent {
                Extent::Full => Ok((0, dim)),
                Extent::Range { start, length } => {
                    let (start, length) = (start as usize, length as usize);
                    match start.checked_add(length) {
                        Some(end) if end <= dim => Ok((start, length)),
                        _ => Err(format!("{start},{length} exceeds dimension {dim}")),
                    }
                }
            })
            .collect::<Result<_, String>>()?;
        Ok(Self { bounds })
    }

    fn whole(shape: &TensorShape) -> Self {
        Self {
            bounds: shape.iter().map(|d| (0, d)).collect(),
        }
    }

    fn is_whole(&self, shape: &TensorShape) -> bool {
        self.bounds
            .iter()
            .zip(shape.iter())
            .all(|(&b, d)| b == (0, d))
    }

    fn lengths(&self) -> Vec<usize> {
        self.bounds.iter().map(|b| b.1).collect()
    }

    fn num_elements(&self) -> usize {
        self.bounds.iter().map(|b| b.1).product()
    }

    fn intersect(&self, other: &Region) -> Option<Region> {
        let bounds = self
            .bounds
            .iter()
            .zip(&other.bounds)
            .map(|(&(a, la), &(b, lb))| {
                let start = a.max(b);
                let end = (a + la).min(b + lb);
                (end > start).then(|| (start, end - start))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Region { bounds })
    }

    /// The row-major offset in this region of the element at absolute `index`.
    fn offset_of(&self, index: &[usize]) -> usize {
        self.bounds
            .iter()
            .zip(index)
            .fold(0, |acc, (&(start, len), &i)| acc * len + (i - start))
    }
}

/// Elements gathered on the host: fixed-size bytes or strings.
enum HostElements {
    Bytes { bytes: Vec<u8>, size: usize },
    Strings(Vec<Vec<u8>>),
}

impl HostElements {
    fn new(dtype: DataType, count: usize) -> Result<Self> {
        if dtype == DataType::String {
            return Ok(Self::Strings(crate::alloc::host_vec(
                count,
                Vec::new(),
                "a checkpoint read",
            )?));
        }
        let len = count
            .checked_mul(dtype.size())
            .ok_or_else(|| Error::InvalidShape(format!("{count} {dtype} elements overflow")))?;
        Ok(Self::Bytes {
            bytes: crate::alloc::host_vec(len, 0u8, "a checkpoint read")?,
            size: dtype.size(),
        })
    }

    /// Copy the elements of `overlap` from `source` (laid out as `from`) into `self` (laid
    /// out as `to`), one innermost run at a time.
    fn copy_region(&mut self, source: &HostElements, from: &Region, to: &Region, overlap: &Region) {
        let rank = overlap.bounds.len();
        let run = overlap.bounds.last().map_or(1, |b| b.1);
        let mut index: Vec<usize> = overlap.bounds.iter().map(|b| b.0).collect();
        loop {
            let (src, dst) = (from.offset_of(&index), to.offset_of(&index));
            match (&mut *self, source) {
                (Self::Bytes { bytes, size }, Self::Bytes { bytes: s, .. }) => {
                    bytes[dst * *size..(dst + run) * *size]
                        .copy_from_slice(&s[src * *size..(src + run) * *size]);
                }
                (Self::Strings(out), Self::Strings(s)) => {
                    out[dst..dst + run].clone_from_slice(&s[src..src + run]);
                }
                _ => unreachable!("both sides hold the entry's dtype"),
            }
            // The next index over every dimension but the innermost.
            let mut d = rank.saturating_sub(1);
            loop {
                if d == 0 {
                    return;
                }
                d -= 1;
                index[d] += 1;
                if index[d] < overlap.bounds[d].0 + overlap.bounds[d].1 {
                    break;
                }
                index[d] = overlap.bounds[d].0;
            }
        }
    }

    fn into_tensor(
        self,
        shape: TensorShape,
        dtype: DataType,
        device: &Arc<dyn Device>,
    ) -> Result<Tensor> {
        match self {
            Self::Bytes { bytes, .. } => Tensor::from_bytes(&bytes, shape, dtype, device),
            Self::Strings(strings) => Tensor::from_strings(strings, shape, device),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::VersionDef;

    /// An index claiming `num_shards` shards and one float entry of `dims`, of the size
    /// those dims need, at offset 0 of shard 0.
    fn hostile_index(dir: &Path, num_shards: i32, dims: &[usize]) -> PathBuf {
        let prefix = dir.join("ckpt");
        let header = BundleHeaderProto {
            num_shards,
            endianness: 0,
            version: Some(VersionDef {
                producer: 1,
                ..Default::default()
            }),
        };
        let shape = TensorShape::new(dims).unwrap();
        let entry = BundleEntryProto {
            dtype: DataType::Float.as_i32(),
            shape: Some(shape.to_proto()),
            size: (shape.num_elements() * 4) as i64,
            ..Default::default()
        };
        let mut table = table::TableWriter::new();
        table.add(b"", &header.encode_to_vec()).unwrap();
        table.add(b"w", &entry.encode_to_vec()).unwrap();
        std::fs::write(index_path(&prefix), table.finish()).unwrap();
        std::fs::write(data_path(&prefix, 0, num_shards as usize), [0u8; 16]).unwrap();
        prefix
    }

    #[test]
    #[cfg_attr(miri, ignore = "files")]
    fn an_index_cannot_make_a_reader_allocate_what_the_files_lack() {
        let dir = std::env::temp_dir().join(format!("pt-ckpt-hostile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Two billion shards cost nothing until one is opened.
        let reader = Reader::open(hostile_index(&dir, i32::MAX, &[2])).unwrap();
        assert_eq!(reader.num_shards(), i32::MAX as usize);
        // A terabyte tensor in a 16-byte file is refused before any allocation.
        let reader = Reader::open(hostile_index(&dir, 1, &[1 << 38])).unwrap();
        let location = reader.entry("w").unwrap().location;
        match reader.check_extent("w", location) {
            Err(Error::DataLoss(message)) => {
                assert!(message.contains("the file ends"), "{message}")
            }
            other => panic!("{other:?}"),
        }
        std::fs::remove_dir_all(dir).ok();
    }
}
