//! [`StridedRows`]: a coalesced shape walked row by row, the loop every host kernel shares.

use smallvec::SmallVec;

use super::{Coalesced, INLINE_RANK};

/// Rows of a strided loop over one shape shared by `N` operands: the shape is coalesced
/// (size-1 dims dropped, dims merged where every operand's strides allow), then walked
/// as an outer odometer over rows of the innermost dim.
///
/// ```
/// use polytensor_core::plan::StridedRows;
/// // A 2x3 transpose of a row-major 3x2 buffer, read next to a contiguous 2x3.
/// let rows = StridedRows::new(&[2, 3], [&[1, 2], &[3, 1]], [0, 0]);
/// assert_eq!(rows.row_len(), 3);
/// assert_eq!(rows.inner_strides(), [2, 1]);
/// let starts: Vec<[isize; 2]> = rows.collect();
/// assert_eq!(starts, vec![[0, 0], [1, 3]]);
/// ```
#[derive(Debug, Clone)]
pub struct StridedRows<const N: usize> {
    outer: SmallVec<[usize; INLINE_RANK]>,
    outer_strides: [SmallVec<[isize; INLINE_RANK]>; N],
    row_len: usize,
    inner: [isize; N],
    index: SmallVec<[usize; INLINE_RANK]>,
    next: Option<[isize; N]>,
    base: [isize; N],
}

impl<const N: usize> StridedRows<N> {
    /// Rows over `shape` for operands with `strides` and element offsets `offsets`.
    pub fn new(shape: &[usize], strides: [&[isize]; N], offsets: [isize; N]) -> Self {
        let empty = shape.contains(&0);
        let plan = Coalesced::new(shape, &strides);
        let rank = plan.rank();
        let mut dims: SmallVec<[usize; INLINE_RANK]> = SmallVec::from_slice(plan.dims());
        let mut dim_strides: [SmallVec<[isize; INLINE_RANK]>; N] =
            std::array::from_fn(|k| SmallVec::from_slice(plan.strides(k)));
        // The innermost dim is the row; a coalesced plan always has one.
        let row_len = dims.pop().unwrap_or(1);
        let inner = std::array::from_fn(|k| dim_strides[k].pop().unwrap_or(0));
        debug_assert_eq!(dims.len() + 1, rank);
        let index = SmallVec::from_elem(0, dims.len());
        Self {
            outer: dims,
            outer_strides: dim_strides,
            row_len: if empty { 0 } else { row_len },
            inner,
            index,
            next: (!empty).then_some(offsets),
            base: offsets,
        }
    }

    /// The position of each operand's first element in row `row` (`row < num_rows()`), for
    /// splitting the rows among threads.
    pub fn row_start(&self, row: usize) -> [isize; N] {
        let mut positions = self.base;
        let mut rest = row;
        for axis in (0..self.outer.len()).rev() {
            let digit = rest % self.outer[axis];
            rest /= self.outer[axis];
            for (k, p) in positions.iter_mut().enumerate() {
                *p += digit as isize * self.outer_strides[k][axis];
            }
        }
        positions
    }

    /// These rows from row `row` on (`row < num_rows()`): the walk a thread takes over a
    /// range of short rows, without dividing out each row's position.
    pub fn starting_at(&self, row: usize) -> Self {
        let mut rows = self.clone();
        let mut rest = row;
        for axis in (0..rows.outer.len()).rev() {
            rows.index[axis] = rest % rows.outer[axis];
            rest /= rows.outer[axis];
        }
        rows.next = (row < self.num_rows()).then(|| self.row_start(row));
        rows
    }

    /// Whether operand `k` starts every row at the same position (a row broadcast along
    /// every outer dim, such as a per-channel constant beside an image).
    pub fn repeats_one_row(&self, k: usize) -> bool {
        self.outer_strides[k].iter().all(|&s| s == 0)
    }

    /// Elements per row.
    pub fn row_len(&self) -> usize {
        self.row_len
    }

    /// Each operand's stride along a row.
    pub fn inner_strides(&self) -> [isize; N] {
        self.inner
    }

    /// Number of rows.
    pub fn num_rows(&self) -> usize {
        if self.row_len == 0 {
            0
        } else {
            self.outer.iter().product()
        }
    }
}

impl<const N: usize> Iterator for StridedRows<N> {
    type Item = [isize; N];

    /// The position of each operand's first element in the next row.
    fn next(&mut self) -> Option<[isize; N]> {
        let current = self.next?;
        let mut advanced = current;
        let mut axis = self.outer.len();
        loop {
            if axis == 0 {
                self.next = None;
                break;
            }
            axis -= 1;
            self.index[axis] += 1;
            for (k, pos) in advanced.iter_mut().enumerate() {
                *pos += self.outer_strides[k][axis];
            }
            if self.index[axis] < self.outer[axis] {
                self.next = Some(advanced);
                break;
            }
            for (k, pos) in advanced.iter_mut().enumerate() {
                *pos -= self.outer_strides[k][axis] * self.outer[axis] as isize;
            }
            self.index[axis] = 0;
        }
        Some(current)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every position the rows of one operand visit, in order.
    fn positions(rows: StridedRows<1>) -> Vec<isize> {
        let (len, [step]) = (rows.row_len(), rows.inner_strides());
        rows.flat_map(|[start]| (0..len as isize).map(move |i| start + i * step))
            .collect()
    }

    #[test]
    fn starting_at_walks_the_rest_of_the_rows() {
        let rows = StridedRows::new(&[3, 4, 5], [&[1, 3, 12], &[20, 5, 1]], [2, 0]);
        let all: Vec<[isize; 2]> = rows.clone().collect();
        for first in 0..=all.len() {
            let rest: Vec<[isize; 2]> = rows.starting_at(first).collect();
            assert_eq!(rest, all[first..], "from row {first}");
        }
    }

    #[test]
    fn strided_rows_coalesce_and_walk() {
        let rows = StridedRows::new(&[2, 3, 4], [&[12, 4, 1]], [5]);
        assert_eq!((rows.num_rows(), rows.row_len()), (1, 24));
        // A transposed [3, 4]: rows of 3 with stride 4.
        let t = StridedRows::new(&[4, 3], [&[1, 4]], [0]);
        assert_eq!(positions(t), vec![0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]);
        let rows = StridedRows::new(&[3, 4, 5], [&[1, 3, 12]], [2]);
        let starts: Vec<[isize; 1]> = rows.clone().collect();
        assert_eq!(
            (0..rows.num_rows())
                .map(|r| rows.row_start(r))
                .collect::<Vec<_>>(),
            starts
        );
        let empty = StridedRows::new(&[3, 0], [&[0, 1]], [0]);
        assert_eq!(empty.count(), 0);
        let scalar: Vec<_> = StridedRows::new(&[], [&[]], [7]).collect();
        assert_eq!(scalar, vec![[7]]);
        let reversed = StridedRows::new(&[3], [&[-1]], [2]);
        assert_eq!(positions(reversed), vec![2, 1, 0]);
    }
}
