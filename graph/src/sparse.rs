//! Sparse tensors in graphs: a [`SparseOutput`] is the three graph tensors of a sparse
//! tensor's components, as TensorFlow's `SparseTensor` of graph tensors
//! (`tf.compat.v1.sparse_placeholder` makes three placeholders), and a session feeds and
//! fetches it as one value ([`Session::run_values`]).

use polytensor_core::{DataType, Error, PartialTensorShape, Result, SparseTensor, Tensor};

use crate::{Graph, Operation, Output, Session};

/// A sparse tensor of a graph: the tensors of its indices (int64 `[N, R]`), values (`[N]`)
/// and dense shape (int64 `[R]`).
#[derive(Debug, Clone)]
pub struct SparseOutput {
    /// The indices.
    pub indices: Output,
    /// The values.
    pub values: Output,
    /// The dense shape.
    pub dense_shape: Output,
}

impl SparseOutput {
    /// The sparse tensor whose components are the graph tensors named `indices`, `values`
    /// and `dense_shape` (`"Placeholder:0"`, ...), checked to be int64, any, and int64.
    pub fn by_names(graph: &Graph, indices: &str, values: &str, dense_shape: &str) -> Result<Self> {
        let sparse = SparseOutput {
            indices: graph.tensor(indices)?,
            values: graph.tensor(values)?,
            dense_shape: graph.tensor(dense_shape)?,
        };
        for (output, what) in [
            (&sparse.indices, "indices"),
            (&sparse.dense_shape, "dense_shape"),
        ] {
            if output.dtype() != DataType::Int64 {
                return Err(Error::invalid(format!(
                    "a SparseTensor's {what} must be int64, but {} is {}",
                    output.name(),
                    output.dtype()
                )));
            }
        }
        Ok(sparse)
    }

    /// The values' dtype.
    pub fn dtype(&self) -> DataType {
        self.values.dtype()
    }
}

impl Graph {
    /// `tf.compat.v1.sparse_placeholder(dtype, shape, name=name)` with a dense shape of
    /// `rank` dims (unknown where `None`): three placeholders, `{name}/indices`,
    /// `{name}/values` and `{name}/shape`, fed together as one [`SparseTensor`].
    pub fn sparse_placeholder(
        &mut self,
        name: &str,
        dtype: DataType,
        rank: Option<usize>,
    ) -> Result<SparseOutput> {
        let rows = PartialTensorShape::new(&[None, rank])?;
        let values = PartialTensorShape::new(&[None])?;
        let shape = PartialTensorShape::new(&[rank])?;
        Ok(SparseOutput {
            values: self.placeholder_named(&format!("{name}/values"), dtype, &values)?,
            indices: self.placeholder_named(&format!("{name}/indices"), DataType::Int64, &rows)?,
            dense_shape: self.placeholder_named(
                &format!("{name}/shape"),
                DataType::Int64,
                &shape,
            )?,
        })
    }
}

/// A graph endpoint a session feeds or fetches: one tensor, or a sparse tensor's three.
#[derive(Debug, Clone, Copy)]
pub enum Endpoint<'a> {
    /// A tensor.
    Tensor(&'a Output),
    /// A sparse tensor.
    Sparse(&'a SparseOutput),
}

/// A value a session is fed or gives back: a tensor, or a sparse tensor.
#[derive(Clone)]
pub enum SessionValue {
    /// A tensor.
    Tensor(Tensor),
    /// A sparse tensor (boxed: it is three tensors and a shape).
    Sparse(Box<SparseTensor>),
}

impl From<Tensor> for SessionValue {
    fn from(tensor: Tensor) -> Self {
        SessionValue::Tensor(tensor)
    }
}

impl From<SparseTensor> for SessionValue {
    fn from(sparse: SparseTensor) -> Self {
        SessionValue::Sparse(Box::new(sparse))
    }
}

impl SessionValue {
    /// The tensor, or an `Err` for a sparse value.
    pub fn into_tensor(self) -> Result<Tensor> {
        match self {
            SessionValue::Tensor(t) => Ok(t),
            SessionValue::Sparse(_) => {
                Err(Error::invalid("the value is a SparseTensor, not a tensor"))
            }
        }
    }

    /// The sparse tensor, or an `Err` for a tensor.
    pub fn into_sparse(self) -> Result<SparseTensor> {
        match self {
            SessionValue::Sparse(s) => Ok(*s),
            SessionValue::Tensor(_) => {
                Err(Error::invalid("the value is a tensor, not a SparseTensor"))
            }
        }
    }
}

impl Session {
    /// [`run`](Self::run) with sparse tensors among the feeds and fetches: a sparse
    /// endpoint is fed the three components of a [`SparseTensor`] (a tensor fed to it, or a
    /// sparse tensor fed to a tensor, is an `Err`), and a sparse fetch comes back as one,
    /// its components checked as `SparseTensor::new` checks them.
    pub fn run_values(
        &self,
        feeds: &[(Endpoint<'_>, &SessionValue)],
        fetches: &[Endpoint<'_>],
        targets: &[&Operation],
    ) -> Result<Vec<SessionValue>> {
        let mut flat_feeds: Vec<(&Output, &Tensor)> = Vec::new();
        for (endpoint, value) in feeds {
            match (endpoint, value) {
                (Endpoint::Tensor(output), SessionValue::Tensor(t)) => flat_feeds.push((output, t)),
                (Endpoint::Sparse(sparse), SessionValue::Sparse(value)) => flat_feeds.extend([
                    (&sparse.indices, value.indices()),
                    (&sparse.values, value.values()),
                    (&sparse.dense_shape, value.dense_shape()),
                ]),
                (Endpoint::Tensor(output), SessionValue::Sparse(_)) => {
                    return Err(Error::invalid(format!(
                        "a SparseTensor cannot be fed to the tensor {}",
                        output.name()
                    )))
                }
                (Endpoint::Sparse(sparse), SessionValue::Tensor(_)) => {
                    return Err(Error::invalid(format!(
                        "the SparseTensor of {} must be fed a SparseTensor, not a tensor",
                        sparse.values.name()
                    )))
                }
            }
        }
        let mut flat_fetches: Vec<&Output> = Vec::new();
        for endpoint in fetches {
            match endpoint {
                Endpoint::Tensor(output) => flat_fetches.push(output),
                Endpoint::Sparse(sparse) => {
                    flat_fetches.extend([&sparse.indices, &sparse.values, &sparse.dense_shape])
                }
            }
        }
        let mut fetched = self.run(&flat_feeds, &flat_fetches, targets)?.into_iter();
        let mut next = || {
            fetched.next().ok_or_else(|| {
                Error::invalid("the session gave fewer values than it was asked for")
            })
        };
        fetches
            .iter()
            .map(|endpoint| match endpoint {
                Endpoint::Tensor(_) => Ok(SessionValue::Tensor(next()?)),
                Endpoint::Sparse(_) => {
                    let (indices, values, shape) = (next()?, next()?, next()?);
                    Ok(SparseTensor::new(indices, values, shape)?.into())
                }
            })
            .collect()
    }
}
