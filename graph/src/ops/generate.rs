//! Ops that make values from a rule: `LinSpace`, and the seeded random ops
//! (`RandomUniform`, `RandomStandardNormal`, `TruncatedNormal`) with TensorFlow's Philox
//! streams ([`polytensor_core::random`]). A random op is stateful, as in TensorFlow: each
//! run of it in a session continues its stream where the last run left it.

use smallvec::smallvec;

use polytensor_core::random::{Distribution, CALLS_PER_OUTPUT};
use polytensor_core::{Error, Result, Scalar, Tensor};

use super::kernels::{Outputs, RunCtx};
use super::{InferCtx, Source, Value};
use crate::graph::Typed;

/// A generating op.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Generate {
    LinSpace,
    Random(Distribution),
}

impl Generate {
    /// The type attributes tied to the inputs.
    pub(crate) fn typed(self) -> &'static [(&'static str, Source)] {
        use Source::Input;
        match self {
            Generate::LinSpace => &[("T", Input(0)), ("T", Input(1)), ("Tidx", Input(2))],
            Generate::Random(_) => &[("T", Input(0))],
        }
    }
}

/// The static outputs of `op`.
pub(crate) fn infer(op: Generate, cx: &InferCtx<'_>) -> Result<Vec<Typed>> {
    match op {
        Generate::LinSpace => {
            let inputs = cx.exactly(3)?;
            let num = cx
                .const_ints(2)
                .and_then(|n| n.first().and_then(|&n| usize::try_from(n).ok()));
            Ok(vec![(inputs[0].0, super::infer::known([num])?)])
        }
        Generate::Random(_) => {
            cx.exactly(1)?;
            let dtype = cx.attrs().dtype("dtype")?;
            if !dtype.is_float() {
                return Err(cx.error(format!(
                    "random values of {dtype}: the op takes half, bfloat16, float and double"
                )));
            }
            cx.with_rank(0, 1)?;
            Ok(vec![(dtype, cx.shape_value(0)?)])
        }
    }
}

/// Run `op`.
pub(crate) fn run(op: Generate, cx: &mut RunCtx<'_, '_>) -> Result<Outputs> {
    let out = match op {
        Generate::LinSpace => {
            let scalar = |i: usize| -> Result<f64> {
                let t = cx.tensor(i)?;
                match t.to_scalars()?[..] {
                    [v] => Ok(v.to_f64()),
                    _ => Err(Error::invalid(format!(
                        "LinSpace input {i} must be a scalar, got shape {}",
                        t.shape()
                    ))),
                }
            };
            let num = match cx.ints(2)?[..] {
                [n] if n > 0 => n as usize,
                [n] => return Err(Error::invalid(format!("Requires num > 0: {n}"))),
                _ => return Err(Error::invalid("num must be a scalar")),
            };
            let dtype = cx.tensor(0)?.dtype();
            Tensor::linspace(scalar(0)?, scalar(1)?, num, dtype, cx.device)?
        }
        Generate::Random(distribution) => {
            let attrs = cx.attrs();
            let dtype = attrs.dtype("dtype")?;
            let (mut seed, mut seed2) = (attrs.int_or("seed", 0)?, attrs.int_or("seed2", 0)?);
            if seed == 0 && seed2 == 0 {
                // TensorFlow draws fresh seeds for an unseeded op; so does this.
                let fresh = std::collections::hash_map::RandomState::new();
                use std::hash::BuildHasher;
                seed = fresh.hash_one(&cx.node.name) as i64;
                seed2 = fresh.hash_one(seed) as i64;
            }
            cx.require_rank(0, 1, |s| {
                format!("shape must be a vector of {{int32,int64}}, got shape {s}")
            })?;
            let dims: Vec<usize> = cx
                .ints(0)?
                .iter()
                .map(|&d| {
                    usize::try_from(d).map_err(|_| Error::invalid(format!("negative dim {d}")))
                })
                .collect::<Result<_>>()?;
            // Where the stream of this node stands: a host counter kept with the
            // session's variables under a name no graph can use.
            let key: std::sync::Arc<str> = format!("\0philox:{}", cx.node.name).into();
            let offset = match cx.variables.get(&key) {
                Some(t) => match t.to_scalars()?.first() {
                    Some(Scalar::I64(v)) => *v as u64,
                    _ => 0,
                },
                None => 0,
            };
            let t = Tensor::random(
                dims.as_slice(),
                dtype,
                distribution,
                (seed as u64, seed2 as u64, offset),
                cx.device,
            )?;
            let used = (t.num_elements() as u64).saturating_mul(CALLS_PER_OUTPUT);
            let next = Tensor::scalar(offset.wrapping_add(used) as i64, cx.device)?;
            cx.variables.insert(key, next);
            t
        }
    };
    Ok(smallvec![Value::Tensor(out)])
}
