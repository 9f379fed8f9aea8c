//! What each rank is about to move, agreed before the transfer: the collective, its
//! argument (a reduction, a root, a role), the dtype and the shape, as a fixed row of
//! `i64`s that every rank all-gathers (or a sender sends ahead of its tensor). A rank whose
//! row differs from the others' makes the collective an `Err` on every rank, since every
//! rank sees every row.

use polytensor_core::{DataType, Error, Result, TensorShape};

/// The most dims a collective's tensor may have (TensorFlow's limit, 254, is far above any
/// collective's need; the header row stays small).
pub(crate) const MAX_RANK: usize = 16;

/// Words of one header row: collective, argument, dtype, rank, dims.
pub(crate) const WORDS: usize = 4 + MAX_RANK;

/// A header row.
pub(crate) type Row = [i64; WORDS];

/// The calls, as header rows number them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    AllReduce = 0,
    Broadcast = 1,
    AllGather = 2,
    ReduceScatter = 3,
    AllToAll = 4,
    /// A broadcast whose root is the one rank that sends (`broadcast_send`, and
    /// `broadcast_recv` on the others): the argument is 1 on the sender, 0 elsewhere.
    BroadcastByRole = 5,
    /// A point-to-point send, whose row precedes its tensor.
    Send = 6,
    /// A call this rank refused before anything moved (a bad output tensor, say): the
    /// others see the refusal and fail alike.
    Refused = 7,
    /// Joining an NCCL communicator (the argument is 0; the row's tensor is the unique id).
    Join = 8,
}

impl Kind {
    const ALL: [Kind; 9] = [
        Kind::AllReduce,
        Kind::Broadcast,
        Kind::AllGather,
        Kind::ReduceScatter,
        Kind::AllToAll,
        Kind::BroadcastByRole,
        Kind::Send,
        Kind::Refused,
        Kind::Join,
    ];

    /// The call's name in messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::AllReduce => "all_reduce",
            Kind::Broadcast => "broadcast",
            Kind::AllGather => "all_gather",
            Kind::ReduceScatter => "reduce_scatter",
            Kind::AllToAll => "all_to_all",
            Kind::BroadcastByRole => "broadcast_send/recv",
            Kind::Send => "send",
            Kind::Refused => "a call it refused (its error says why)",
            Kind::Join => "joining an NCCL communicator",
        }
    }

    /// The call a row's first word numbers.
    fn of(word: i64) -> Option<Kind> {
        Kind::ALL.into_iter().find(|&k| k as i64 == word)
    }
}

/// The header row of call `kind` with `argument` on a tensor of `dtype` and `shape` (its
/// rank in full, its first [`MAX_RANK`] dims).
pub(crate) fn row(kind: Kind, argument: i64, dtype: DataType, shape: &TensorShape) -> Row {
    let mut row = [0i64; WORDS];
    row[0] = kind as i64;
    row[1] = argument;
    row[2] = i64::from(dtype.as_i32());
    row[3] = shape.rank() as i64;
    for (slot, &d) in row[4..].iter_mut().zip(shape.dims().iter()) {
        *slot = d as i64;
    }
    row
}

/// The dtype and shape a row describes (a received send's), or an `Err` for a row no
/// polytensor sender writes.
pub(crate) fn tensor_of(row: &Row) -> Result<(DataType, TensorShape)> {
    let bad = || Error::invalid(format!("received a header row no sender writes: {row:?}"));
    let dtype = DataType::from_i32(row[2] as i32).map_err(|_| bad())?;
    let rank = usize::try_from(row[3]).map_err(|_| bad())?;
    if rank > MAX_RANK {
        return Err(bad());
    }
    let dims = row[4..4 + rank]
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| bad()))
        .collect::<Result<Vec<usize>>>()?;
    Ok((dtype, TensorShape::new(&dims)?))
}

/// An `Err` for a tensor of more dims than a header row holds (after the rows agreed, so
/// every rank refuses it alike).
pub(crate) fn check_rank(shape: &TensorShape) -> Result<()> {
    if shape.rank() > MAX_RANK {
        return Err(Error::invalid(format!(
            "a collective takes tensors of at most {MAX_RANK} dims, got {shape}"
        )));
    }
    Ok(())
}

/// An `Err` naming the first rank whose row differs from rank 0's, with what each passed;
/// with `by_role`, the arguments (the roles) may differ.
pub(crate) fn agree(name: &str, rows: &[Row], by_role: bool) -> Result<()> {
    let Some(first) = rows.first() else {
        return Ok(());
    };
    let key = |row: &Row| {
        let mut row = *row;
        if by_role {
            row[1] = 0;
        }
        row
    };
    for (rank, row) in rows.iter().enumerate().skip(1) {
        if key(row) != key(first) {
            return Err(Error::invalid(format!(
                "{name}: rank {rank} passed {} but rank 0 passed {}; every rank must make \
                 the same call on tensors of one dtype and shape",
                describe(row),
                describe(first)
            )));
        }
    }
    Ok(())
}

/// The one rank whose row of a broadcast by role says it sends (`broadcast_send`), or an
/// `Err` on every rank.
pub(crate) fn sender(rows: &[Row]) -> Result<usize> {
    let senders: Vec<usize> = (0..rows.len()).filter(|&r| rows[r][1] == 1).collect();
    match senders[..] {
        [root] => Ok(root),
        [] => Err(Error::invalid(
            "broadcast_recv: no rank called broadcast_send",
        )),
        _ => Err(Error::invalid(format!(
            "broadcast_send: ranks {senders:?} all sent; one rank sends"
        ))),
    }
}

/// The rows gathered as a flat buffer, one row per rank.
pub(crate) fn split_rows(flat: &[i64]) -> Vec<Row> {
    flat.chunks_exact(WORDS)
        .map(|chunk| {
            let mut row = [0i64; WORDS];
            row.copy_from_slice(chunk);
            row
        })
        .collect()
}

/// A row as a reader would say it: `all_reduce(0) of float32 [2,3]`.
fn describe(row: &Row) -> String {
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
        let a = row(
            Kind::AllReduce,
            0,
            DataType::Float,
            &TensorShape::new(&[2, 3]).unwrap(),
        );
        let b = row(
            Kind::AllReduce,
            0,
            DataType::Float,
            &TensorShape::new(&[2, 4]).unwrap(),
        );
        assert!(agree("all_reduce", &[a, a], false).is_ok());
        let message = agree("all_reduce", &[a, a, b], false)
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
    }

    #[test]
    fn roles_may_differ_where_asked() {
        let shape = TensorShape::new(&[5]).unwrap();
        let sender = row(Kind::BroadcastByRole, 1, DataType::Int32, &shape);
        let receiver = row(Kind::BroadcastByRole, 0, DataType::Int32, &shape);
        assert!(agree("broadcast", &[sender, receiver], true).is_ok());
        assert!(agree("broadcast", &[sender, receiver], false).is_err());
    }

    #[test]
    fn rows_give_back_their_tensor_and_refuse_garbage() {
        let shape = TensorShape::new(&[4, 0, 2]).unwrap();
        let sent = row(Kind::Send, 0, DataType::BFloat16, &shape);
        let (dtype, got) = tensor_of(&sent).unwrap();
        assert_eq!((dtype, got), (DataType::BFloat16, shape));
        let mut garbage = sent;
        garbage[3] = 99;
        assert!(tensor_of(&garbage).is_err());
        garbage[3] = 1;
        garbage[4] = -3;
        assert!(tensor_of(&garbage).is_err());
        garbage[2] = 12345;
        assert!(tensor_of(&garbage).is_err());
    }
}
