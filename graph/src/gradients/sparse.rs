//! Sparse gradients: TensorFlow's `tf.IndexedSlices`. A gather's gradient is the gradient
//! of the rows it read, not a tensor of the whole table: [`Gradient::Slices`]. It passes
//! through identities and variable reads as it is, several add up by concatenation, and
//! any other op gets it densified (`UnsortedSegmentSum` of the slices into the rows), as
//! in TensorFlow. Optimizers update only those rows (`ResourceSparseApply*`).

use polytensor_core::{Error, Result};

use super::math::dy;
use super::Forward;
use crate::graph::{Graph, Output};

/// A gradient as [`Graph::indexed_gradients`] gives it: a tensor, or the slices of some
/// rows of one.
#[derive(Clone, Debug)]
pub enum Gradient {
    /// A tensor of the shape of what it is the gradient of.
    Dense(Output),
    /// The gradients of some rows (a gather's).
    Slices(Box<IndexedSlices>),
}

/// TensorFlow's `tf.IndexedSlices`: `values[i]` is the gradient of row `indices[i]` of a
/// tensor of shape `dense_shape`; rows not named have none, rows named twice add up.
#[derive(Clone, Debug)]
pub struct IndexedSlices {
    /// `[n] + dense_shape[1..]`.
    pub values: Output,
    /// The `n` rows, an int32 or int64 vector.
    pub indices: Output,
    /// The shape of the dense gradient, an int32 vector.
    pub dense_shape: Output,
}

/// The ops whose gradient to their first input is their output's, slices and all.
const PASS_THROUGH: &[&str] = &["Identity", "ReadVariableOp", "Snapshot"];

impl Graph {
    /// The tensor `gradient` stands for: itself, or its slices summed into the rows
    /// (`UnsortedSegmentSum(values, indices, dense_shape[0])`).
    pub fn densify(&mut self, gradient: &Gradient) -> Result<Output> {
        let slices = match gradient {
            Gradient::Dense(output) => return Ok(output.clone()),
            Gradient::Slices(slices) => slices,
        };
        let rows = self.leading(&slices.dense_shape)?;
        self.apply(
            "UnsortedSegmentSum",
            &[&slices.values, &slices.indices, &rows],
            Vec::new(),
        )
    }

    /// The first element of vector `v`, as a scalar.
    fn leading(&mut self, v: &Output) -> Result<Output> {
        let (begin, size) = (
            self.constant_values(&[0i32], &[1])?,
            self.constant_values(&[1i32], &[1])?,
        );
        let first = self.apply("Slice", &[v, &begin, &size], Vec::new())?;
        let scalar = self.constant_values::<i32>(&[], &[0])?;
        self.apply("Reshape", &[&first, &scalar], Vec::new())
    }

    /// The sum of a tensor's gradients: `None` for none, the one, the slices of all
    /// concatenated where every one is slices, else the `AddN` of them densified.
    pub(super) fn sum_of(&mut self, mut parts: Vec<Gradient>) -> Result<Option<Gradient>> {
        if parts.len() <= 1 {
            return Ok(parts.pop());
        }
        let slices: Vec<&IndexedSlices> = parts
            .iter()
            .filter_map(|p| match p {
                Gradient::Slices(s) => Some(&**s),
                Gradient::Dense(_) => None,
            })
            .collect();
        if slices.len() == parts.len() {
            let zero = self.constant(0i32)?;
            let join = |g: &mut Graph, pick: fn(&IndexedSlices) -> &Output| {
                let all: Vec<Output> = slices.iter().map(|s| pick(s).clone()).collect();
                g.op("ConcatV2").inputs(&all).input(&zero).build_output()
            };
            let values = join(self, |s| &s.values)?;
            let indices = join(self, |s| &s.indices)?;
            let dense_shape = slices[0].dense_shape.clone();
            return Ok(Some(Gradient::Slices(Box::new(IndexedSlices {
                values,
                indices,
                dense_shape,
            }))));
        }
        let dense = parts
            .iter()
            .map(|p| self.densify(p))
            .collect::<Result<Vec<_>>>()?;
        self.op("AddN")
            .inputs(&dense)
            .build_output()
            .map(|sum| Some(Gradient::Dense(sum)))
    }

    /// The gradients of op `f`'s inputs where they may stay slices: a gather's, as slices
    /// of the table; an identity's or a read's of slices, the same slices. `None` for any
    /// other op (its gradient function takes dense gradients).
    pub(super) fn sparse_backward(
        &mut self,
        f: &Forward,
        dys: &[Option<Gradient>],
    ) -> Result<Option<Vec<Option<Gradient>>>> {
        let op_type = f.op.op_type();
        if PASS_THROUGH.contains(&op_type) {
            return Ok(match dys.first() {
                Some(Some(Gradient::Slices(slices))) => {
                    Some(vec![Some(Gradient::Slices(slices.clone()))])
                }
                _ => None,
            });
        }
        if !matches!(op_type, "GatherV2" | "ResourceGather") {
            return Ok(None);
        }
        let dense = dys
            .iter()
            .map(|d| d.as_ref().map(|d| self.densify(d)).transpose())
            .collect::<Result<Vec<_>>>()?;
        let slices = self.gather_slices(f, &dense)?;
        let mut grads = vec![Some(Gradient::Slices(Box::new(slices)))];
        grads.resize(f.inputs.len(), None);
        Ok(Some(grads))
    }

    /// A gather's gradient (`GatherV2` on axis 0, `ResourceGather`): the output's gradient
    /// as the slices of the rows the indices read.
    fn gather_slices(&mut self, f: &Forward, dys: &[Option<Output>]) -> Result<IndexedSlices> {
        let resource = f.op.op_type() == "ResourceGather";
        let batch_dims = crate::attr::Attrs {
            node: f.op.name(),
            attrs: &f.attrs,
        }
        .int_or("batch_dims", 0)?;
        let axis = if resource {
            Some(vec![0])
        } else {
            self.const_ints(&f.inputs[2])
        };
        if batch_dims != 0 || axis.as_deref() != Some(&[0]) {
            return Err(Error::invalid(format!(
                "the gradient of '{}' is supported for gathers on axis 0 without batch dims",
                f.op.name()
            )));
        }
        // The table's shape (a variable's without reading it: a read held while its
        // sparse update runs would make the update copy the table).
        let dense_shape = if resource {
            self.op("VariableShape")
                .input(&f.inputs[0])
                .attr("out_type", polytensor_core::DataType::Int32)
                .build_output()?
        } else {
            self.shape_of(&f.inputs[0])?
        };
        // values: [n] + the table's row shape.
        let (begin, size) = (
            self.constant_values(&[1i32], &[1])?,
            self.constant_values(&[-1i32], &[1])?,
        );
        let row = self.apply("Slice", &[&dense_shape, &begin, &size], Vec::new())?;
        let all = self.constant_values(&[-1i32], &[1])?;
        let zero = self.constant(0i32)?;
        let shape = self
            .op("ConcatV2")
            .input(&all)
            .input(&row)
            .input(&zero)
            .build_output()?;
        let values = self.apply("Reshape", &[dy(f, dys, 0)?, &shape], Vec::new())?;
        let indices = self.apply("Reshape", &[&f.inputs[1], &all], Vec::new())?;
        Ok(IndexedSlices {
            values,
            indices,
            dense_shape,
        })
    }

    /// `slices` with each row once: TensorFlow's `_deduplicate_indexed_slices`, `Unique`
    /// of the indices and `UnsortedSegmentSum` of the values by where each went.
    pub(crate) fn deduplicated(&mut self, slices: &IndexedSlices) -> Result<IndexedSlices> {
        let unique = self.op("Unique").input(&slices.indices).build()?;
        let (rows, positions) = (self.output(&unique, 0)?, self.output(&unique, 1)?);
        let shape = self.shape_of(&rows)?;
        let count = self.leading(&shape)?;
        let values = self.apply(
            "UnsortedSegmentSum",
            &[&slices.values, &positions, &count],
            Vec::new(),
        )?;
        Ok(IndexedSlices {
            values,
            indices: rows,
            dense_shape: slices.dense_shape.clone(),
        })
    }
}
