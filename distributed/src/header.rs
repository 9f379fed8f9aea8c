//! What each rank is about to move, agreed before the transfer: the collective, its
//! argument (a reduction, a root), the dtype and the shape, as a fixed row of `i64`s that
//! every rank all-gathers. A rank whose row differs from the others' makes the collective an
//! `Err` on every rank, since every rank sees every row.

use polytensor_core::{DataType, Error, Result, Tensor};

/// The most dims a collective's tensor may have (TensorFlow's limit, 254, is far above any
/// collective's need; the header row stays small).
pub(crate) const MAX_RANK: usize = 16;

/// Words of one header row: collective, argument, dtype, rank, dims.
pub(crate) const WORDS: usize = 4 + MAX_RANK;

/// The collectives, as header rows number them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    AllReduce = 0,
    Broadcast = 1,
    AllGather = 2,
}

impl Kind {
    /// The collective's name in messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::AllReduce => "all_reduce",
            Kind::Broadcast => "broadcast",
            Kind::AllGather => "all_gather",
        }
    }

    /// The collective a row's first word numbers.
    fn of(word: i64) -> Option<Kind> {
        [Kind::AllReduce, Kind::Broadcast, Kind::AllGather]
            .into_iter()
            .find(|&k| k as i64 == word)
    }
}

/// The header row of collective `kind` with `argument` on `tensor` (its rank in full, its
/// first [`MAX_RANK`] dims).
pub(crate) fn row(kind: Kind, argument: i64, tensor: &Tensor) -> [i64; WORDS] {
    let dims = tensor.dims();
    let mut row = [0i64; WORDS];
    row[0] = kind as i64;
    row[1] = argument;
    row[2] = i64::from(tensor.dtype().as_i32());
    row[3] = dims.len() as i64;
    for (slot, &d) in row[4..].iter_mut().zip(dims.iter()) {
        *slot = d as i64;
    }
    row
}

/// An `Err` for a tensor of more dims than a header row holds (after the rows agreed, so
/// every rank refuses it alike).
pub(crate) fn check_rank(tensor: &Tensor) -> Result<()> {
    if tensor.rank() > MAX_RANK {
        return Err(Error::invalid(format!(
            "a collective takes tensors of at most {MAX_RANK} dims, got {}",
            tensor.shape()
        )));
    }
    Ok(())
}

/// An `Err` naming the first rank whose row differs from rank 0's, with what each passed;
/// `compare_dim0` false where the first dims may differ.
pub(crate) fn agree(name: &str, rows: &[[i64; WORDS]], compare_dim0: bool) -> Result<()> {
    let Some(first) = rows.first() else {
        return Ok(());
    };
    let key = |row: &[i64; WORDS]| {
        let mut row = *row;
        if !compare_dim0 && row[3] > 0 {
            row[4] = 0;
        }
        row
    };
    for (rank, row) in rows.iter().enumerate().skip(1) {
        if key(row) != key(first) {
            return Err(Error::invalid(format!(
                "{name}: rank {rank} passed {} but rank 0 passed {}; every rank must call the \
                 same collective on tensors of one dtype and shape",
                describe(row),
                describe(first)
            )));
        }
    }
    Ok(())
}

/// A row as a reader would say it: `all_reduce(sum) of float32 [2,3]`.
fn describe(row: &[i64; WORDS]) -> String {
    let kind = Kind::of(row[0]).map_or("a collective", Kind::name);
    let dtype = DataType::from_i32(row[2] as i32).map_or("an unknown dtype", |d| d.name());
    let rank = (row[3].max(0) as usize).min(MAX_RANK);
    let dims: Vec<String> = row[4..4 + rank].iter().map(i64::to_string).collect();
    format!("{kind}({}) of {dtype} [{}]", row[1], dims.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differing_rows_name_the_rank_and_both_calls() {
        let mut a = [0i64; WORDS];
        a[2] = 1;
        a[3] = 2;
        a[4] = 2;
        a[5] = 3;
        let mut b = a;
        b[5] = 4;
        assert!(agree("all_reduce", &[a, a], true).is_ok());
        let message = agree("all_reduce", &[a, a, b], true)
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("rank 2 passed all_reduce(0) of float32 [2,4]"),
            "{message}"
        );
        assert!(
            message.contains("rank 0 passed all_reduce(0) of float32 [2,3]"),
            "{message}"
        );
        let mut c = a;
        c[4] = 7;
        assert!(agree("all_gather", &[a, c], false).is_ok());
        assert!(agree("all_gather", &[a, c], true).is_err());
    }
}
