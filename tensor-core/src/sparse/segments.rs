//! The structure of a segment reduction ([`crate::plan::segment`]) built on the host from
//! sparse indices: which data rows each segment folds. The values it is run on stay on
//! their device ([`Tensor::segment_reduce`]); strings, which only host devices hold, are
//! gathered on the host.

use crate::dtype::DataType;
use crate::element::Scalar;
use crate::error::{Error, Result};
use crate::plan::segment::SegmentOp;
use crate::tensor::{with_rows, Tensor};

/// Which data rows each segment of a reduction folds, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SegmentList {
    /// The data row of each entry, entries grouped by segment.
    rows: Vec<i32>,
    /// Segment `s` is entries `offsets[s]..offsets[s + 1]`.
    offsets: Vec<i32>,
    /// The caller's number of each entry (its weight's position), where grouping moved
    /// entries; `None` where entries kept their order.
    order: Option<Vec<usize>>,
}

/// `value` as a kernel's int32 position, or an `Err` naming `what`.
fn position(value: usize, what: &str) -> Result<i32> {
    i32::try_from(value).map_err(|_| {
        Error::invalid(format!(
            "{what} of {value} is beyond the segment kernels' int32 positions"
        ))
    })
}

impl SegmentList {
    /// Entries grouped into `segments` segments: entry `i` reads data row `rows[i]` into
    /// segment `keys[i]` (each below `segments`). Entries of one segment keep their order.
    pub(crate) fn group(keys: &[usize], rows: &[usize], segments: usize) -> Result<Self> {
        if keys.len() != rows.len() || keys.iter().any(|&key| key >= segments) {
            return Err(Error::invalid(format!(
                "a segment list of {} keys, {} rows and {segments} segments is inconsistent",
                keys.len(),
                rows.len()
            )));
        }
        position(segments, "a segment count")?;
        position(keys.len(), "a segment reduction's entry count")?;
        let mut offsets = vec![0i32; segments + 1];
        for &key in keys {
            offsets[key + 1] += 1;
        }
        for s in 0..segments {
            offsets[s + 1] += offsets[s];
        }
        let sorted = keys.windows(2).all(|w| w[0] <= w[1]);
        if sorted {
            // Already grouped: the rows as they are.
            let grouped = rows
                .iter()
                .map(|&row| position(row, "a data row"))
                .collect::<Result<Vec<i32>>>()?;
            return Ok(Self {
                rows: grouped,
                offsets,
                order: None,
            });
        }
        let mut grouped = vec![0i32; keys.len()];
        let mut order = vec![0usize; keys.len()];
        let mut next: Vec<i32> = offsets[..segments].to_vec();
        for (i, (&key, &row)) in keys.iter().zip(rows).enumerate() {
            let at = next[key] as usize;
            next[key] += 1;
            grouped[at] = position(row, "a data row")?;
            order[at] = i;
        }
        Ok(Self {
            rows: grouped,
            offsets,
            order: Some(order),
        })
    }

    /// One segment per pick: data row `Some(r)`, or `None` for an empty segment (which a
    /// gather fills).
    pub(crate) fn picks(picks: impl IntoIterator<Item = Option<usize>>) -> Result<Self> {
        let mut rows = Vec::new();
        let mut offsets = vec![0i32];
        for pick in picks {
            if let Some(row) = pick {
                rows.push(position(row, "a data row")?);
            }
            offsets.push(position(rows.len(), "a segment reduction's entry count")?);
        }
        Ok(Self {
            rows,
            offsets,
            order: None,
        })
    }

    /// The number of segments (output rows).
    pub(crate) fn segments(&self) -> usize {
        self.offsets.len() - 1
    }

    /// `op` over the rows of `data` (on its device), weighted by `weights` (one per entry,
    /// in the caller's order), empty segments of a gather or maximum holding `fill`.
    pub(crate) fn run(
        &self,
        op: SegmentOp,
        data: &Tensor,
        weights: Option<&Tensor>,
        fill: Scalar,
    ) -> Result<Tensor> {
        if data.dtype() == DataType::String && op == SegmentOp::Gather {
            return self.gather_strings(data);
        }
        let device = data.device();
        let rows = Tensor::from_slice(&self.rows, [self.rows.len()], device)?;
        let offsets = Tensor::from_slice(&self.offsets, [self.offsets.len()], device)?;
        let weights = match (weights, &self.order) {
            (Some(w), Some(order)) => Some(gather(w, order)?),
            (w, _) => w.cloned(),
        };
        data.segment_reduce(op, &rows, &offsets, weights.as_ref(), fill)
    }

    /// A gather of string rows, on the host (where string tensors live).
    fn gather_strings(&self, data: &Tensor) -> Result<Tensor> {
        let strings = data.to_strings()?;
        let dims = data.dims();
        let width: usize = dims.iter().skip(1).product();
        let mut out = Vec::with_capacity(self.segments() * width);
        for s in 0..self.segments() {
            let (start, end) = (self.offsets[s] as usize, self.offsets[s + 1] as usize);
            match (start..end).last() {
                Some(entry) => {
                    let row = self.rows[entry] as usize;
                    out.extend_from_slice(&strings[row * width..(row + 1) * width]);
                }
                None => out.extend(std::iter::repeat_n(Vec::new(), width)),
            }
        }
        Tensor::from_strings(out, with_rows(&dims, self.segments())?, data.device())
    }
}

/// Rows `picks` of `data`, in that order, gathered on its device.
pub(crate) fn gather(data: &Tensor, picks: &[usize]) -> Result<Tensor> {
    SegmentList::picks(picks.iter().map(|&p| Some(p)))?.run(
        SegmentOp::Gather,
        data,
        None,
        Scalar::I64(0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grouping_is_a_stable_counting_sort() {
        let list = SegmentList::group(&[2, 0, 2, 1], &[10, 11, 12, 13], 4).unwrap();
        assert_eq!(list.rows, vec![11, 13, 10, 12]);
        assert_eq!(list.offsets, vec![0, 1, 2, 4, 4]);
        assert_eq!(list.order, Some(vec![1, 3, 0, 2]));
        let sorted = SegmentList::group(&[0, 0, 3], &[5, 6, 7], 4).unwrap();
        assert_eq!((sorted.offsets, sorted.order), (vec![0, 2, 2, 2, 3], None));
    }

    #[test]
    fn picks_leave_empty_segments_for_none() {
        let list = SegmentList::picks([Some(4), None, Some(1)]).unwrap();
        assert_eq!(list.segments(), 3);
        assert_eq!((list.rows, list.offsets), (vec![4, 1], vec![0, 1, 1, 2]));
    }
}
