//! Running a layer case: its inputs drawn and laid out, the layer run through the public
//! `Tensor` API on the device, and the result compared with the naive reference.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use polytensor_core::{
    ConvEpilogue, DataType, Device, Error, MirrorMode, Result, Scalar, Tensor, UnaryOp,
};

use super::reference::{
    concat_reference, output_dims, reference_conv, reference_conv_transpose, reference_pool,
    spatial,
};
use super::{Layer, LayerCase};
use crate::data::{self, Domain, Rng};
use crate::reference::Expected;
use crate::tolerance::Tolerance;
use crate::{build, check, Outcome, Values, Variant};

/// Run one layer case on `device`.
pub fn run_layer(device: &Arc<dyn Device>, case: &LayerCase) -> Outcome {
    match catch_unwind(AssertUnwindSafe(|| execute(device, case))) {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(Error::Unsupported { .. })) => Outcome::Unsupported,
        Ok(Err(e)) => crate::fail(&format!("returned an error: {e}")),
        Err(_) => crate::fail("panicked"),
    }
}

/// The inputs of a case: drawn values, and the device tensor (the first in the case's
/// layout, the others contiguous).
pub(super) struct Inputs<'a> {
    device: &'a Arc<dyn Device>,
    case: &'a LayerCase,
    count: usize,
}

impl Inputs<'_> {
    /// The case's dtype.
    pub(super) fn dtype(&self) -> DataType {
        self.case.dtype
    }

    /// The next input, of `dims`, drawn from `domain`.
    pub(super) fn next(&mut self, dims: &[usize], domain: Domain) -> Result<(Values, Tensor)> {
        self.next_mapped(dims, domain, None)
    }

    /// [`Inputs::next`] with each value `v` drawn replaced by `map(v)` (rounded to the
    /// dtype): a range no domain has.
    pub(super) fn next_mapped(
        &mut self,
        dims: &[usize],
        domain: Domain,
        map: Option<fn(f64) -> f64>,
    ) -> Result<(Values, Tensor)> {
        let n: usize = dims.iter().product();
        let mut rng = Rng::for_case(&format!("{}#{}", self.case.name, self.count));
        let mut drawn = data::values(self.case.dtype, n, domain, &mut rng);
        if let Some(map) = map {
            for v in &mut drawn {
                *v = data::round_to(self.case.dtype, Scalar::F64(map(v.to_f64())));
            }
        }
        let values = Values {
            dims: dims.to_vec(),
            values: drawn,
        };
        let variant = if self.count == 0 {
            self.case.variant
        } else {
            Variant::Contiguous
        };
        self.count += 1;
        let tensor = build(self.device, self.case.dtype, &values, variant)?;
        Ok((values, tensor))
    }
}

/// `x` at `index` of its row-major dims.
pub(super) fn at(x: &Values, index: &[usize]) -> Scalar {
    x.values[index
        .iter()
        .zip(&x.dims)
        .fold(0, |flat, (&i, &d)| flat * d + i)]
}

/// An expected value met exactly (no magnitude to be relative to).
pub(crate) fn exact(value: Scalar) -> Expected {
    Expected {
        value,
        scale: 0.0,
        terms: 1,
    }
}

/// `y(v)` for each value `v` of `x`, rounded to `dtype`, relative to its own magnitude (an
/// elementwise layer's expectation).
fn each(dtype: DataType, x: &Values, y: impl Fn(f64) -> f64) -> Vec<Expected> {
    x.values
        .iter()
        .map(|v| {
            let y = y(v.to_f64());
            Expected {
                value: data::round_to(dtype, Scalar::F64(y)),
                scale: y.abs(),
                terms: 1,
            }
        })
        .collect()
}

fn execute(device: &Arc<dyn Device>, case: &LayerCase) -> Result<Outcome> {
    let mut inputs = Inputs {
        device,
        case,
        count: 0,
    };
    let dtype = case.dtype;
    let (got, want, tolerance): (Tensor, Vec<Expected>, Tolerance) = match &case.layer {
        Layer::Gradient(op) => super::gradient::run(op, &mut inputs)?,
        Layer::Conv {
            image,
            filter,
            options,
            depthwise,
            fused,
        } => {
            let (x, tx) = inputs.next(image, Domain::Finite)?;
            let (f, tf) = inputs.next(filter, Domain::Finite)?;
            let out_channels = if *depthwise {
                filter[2] * filter[3]
            } else {
                filter[3]
            };
            let epilogue = if *fused {
                let (scale, ts) = inputs.next(&[out_channels], Domain::Finite)?;
                let (shift, tt) = inputs.next(&[out_channels], Domain::Finite)?;
                Some(((scale, shift), (ts, tt)))
            } else {
                None
            };
            let got = match &epilogue {
                Some((_, (ts, tt))) => {
                    let parts = ConvEpilogue {
                        scale: Some(ts.clone()),
                        shift: Some(tt.clone()),
                        activation: Some(UnaryOp::Relu6),
                        ..ConvEpilogue::default()
                    };
                    tx.conv2d_fused(&tf, options, *depthwise, &parts)?
                }
                None if *depthwise => tx.depthwise_conv2d(&tf, options)?,
                None => tx.conv2d(&tf, options)?,
            };
            let windows = spatial(
                options.format,
                image,
                [filter[0], filter[1]],
                options.strides,
                options.dilations,
            );
            let want = reference_conv(
                dtype,
                &x,
                &f,
                options.format,
                &windows,
                &options.padding,
                *depthwise,
                epilogue.as_ref().map(|((scale, shift), _)| (scale, shift)),
            )?;

            let tolerance = if *fused {
                Tolerance::Epilogue
            } else {
                Tolerance::Accumulated
            };
            (got, want, tolerance)
        }
        Layer::ConvTranspose {
            image,
            filter,
            options,
        } => {
            let windows = spatial(
                options.format,
                image,
                [filter[0], filter[1]],
                options.strides,
                options.dilations,
            );
            let gradient =
                output_dims(options.format, image, &windows, &options.padding, filter[3])?;
            let (dy, tdy) = inputs.next(&gradient, Domain::Finite)?;
            let (f, tf) = inputs.next(filter, Domain::Finite)?;
            let got = tdy.conv2d_backprop_input(&tf, image, options)?;
            let want = reference_conv_transpose(
                dtype,
                &dy,
                &f,
                options.format,
                &windows,
                &options.padding,
                image[0],
            )?;
            (got, want, Tolerance::Accumulated)
        }
        Layer::Pool {
            image,
            options,
            max,
        } => {
            let (x, tx) = inputs.next(image, Domain::Finite)?;
            let got = if *max {
                tx.max_pool2d(options)?
            } else {
                tx.avg_pool2d(options)?
            };
            let windows = spatial(
                options.format,
                image,
                options.window,
                options.strides,
                [1, 1],
            );
            let want = reference_pool(dtype, &x, options.format, &windows, &options.padding, *max)?;
            let tolerance = if *max {
                Tolerance::Exact
            } else {
                Tolerance::Accumulated
            };
            (got, want, tolerance)
        }
        Layer::BiasAdd(dims, format) => {
            let axis = format.channel_axis(dims.len());
            let (x, tx) = inputs.next(dims, Domain::Finite)?;
            let (b, tb) = inputs.next(&[dims[axis]], Domain::Finite)?;
            let want = crate::indices(&x.dims)
                .map(|i| {
                    let sum = at(&x, &i).to_f64() + b.values[i[axis]].to_f64();
                    exact(data::round_to(dtype, Scalar::F64(sum)))
                })
                .collect();
            (tx.bias_add(&tb, *format)?, want, Tolerance::Exact)
        }
        Layer::Swish(dims, beta) => {
            let (x, tx) = inputs.next(dims, Domain::Finite)?;
            let want = each(dtype, &x, |v| {
                // The argument rounds to the dtype, as the product in the graph does.
                let arg = data::round_to(dtype, Scalar::F64(beta * v)).to_f64();
                v / (1.0 + (-arg).exp())
            });
            // The sigmoid's 4 ulp, the product's rounding and the rounded argument's effect.
            (tx.swish(*beta)?, want, Tolerance::Ulps(6.0))
        }
        Layer::Gelu(dims) => {
            let (x, tx) = inputs.next(dims, Domain::Finite)?;
            let scale = data::round_to(dtype, Scalar::F64(std::f64::consts::FRAC_1_SQRT_2));
            let want = each(dtype, &x, |v| {
                // The argument rounds to the dtype, as the product in the graph does.
                let arg = data::round_to(dtype, Scalar::F64(-v * scale.to_f64())).to_f64();
                0.5 * v * libm::erfc(arg)
            });
            // erfc's 4 ulp, the products' roundings.
            (tx.gelu()?, want, Tolerance::Ulps(6.0))
        }
        Layer::HardSwish(dims, divide) => {
            let (x, tx) = inputs.next(dims, Domain::Finite)?;
            let round = |v: f64| data::round_to(dtype, Scalar::F64(v)).to_f64();
            let sixth = round(1.0 / 6.0);
            let want = each(dtype, &x, |v| {
                // Each op rounds to the dtype, as in the graph.
                let clamped = round(v + 3.0).clamp(0.0, 6.0);
                let gate = round(if *divide {
                    clamped / 6.0
                } else {
                    clamped * sixth
                });
                v * gate
            });
            // The division's ulps on GPUs (2.5 in WGSL and OpenCL), the product's rounding.
            (tx.hard_swish(*divide)?, want, Tolerance::Ulps(4.0))
        }
        Layer::ChannelAffine(dims, activation) => {
            let c = dims[dims.len() - 1];
            let (x, tx) = inputs.next(dims, Domain::Finite)?;
            let (scale, ts) = inputs.next(&[c], Domain::Finite)?;
            let (shift, tt) = inputs.next(&[c], Domain::Finite)?;
            let epilogue = ConvEpilogue {
                scale: Some(ts),
                shift: Some(tt),
                activation: *activation,
                ..ConvEpilogue::default()
            };
            let got = tx.channel_affine(&epilogue)?;
            let want = crate::indices(&x.dims)
                .map(|i| {
                    let k = i[i.len() - 1];
                    let (xv, a, b) = (
                        at(&x, &i).to_f64(),
                        scale.values[k].to_f64(),
                        shift.values[k].to_f64(),
                    );
                    // The product rounds to the dtype before the sum, as two ops would.
                    let product = data::round_to(dtype, Scalar::F64(xv * a)).to_f64();
                    let y = product + b;
                    let y = match activation {
                        Some(UnaryOp::Relu) => y.max(0.0),
                        Some(UnaryOp::Relu6) => y.clamp(0.0, 6.0),
                        Some(UnaryOp::Tanh) => y.tanh(),
                        _ => y,
                    };
                    Expected {
                        value: data::round_to(dtype, Scalar::F64(y)),
                        scale: (xv * a).abs() + b.abs(),
                        terms: 1,
                    }
                })
                .collect();
            (got, want, Tolerance::Epilogue)
        }
        Layer::BatchNorm(dims, format) => {
            let axis = format.channel_axis(dims.len());
            let c = dims[axis];
            let (x, tx) = inputs.next(dims, Domain::Finite)?;
            // The parameters are float32, as TensorFlow's `U`.
            let param = |seed: u64, lo: f64, hi: f64| -> Result<(Vec<f64>, Tensor)> {
                let mut rng = Rng::for_case(&format!("{}#param{seed}", case.name));
                let v: Vec<f64> = (0..c).map(|_| rng.uniform(lo, hi) as f32 as f64).collect();
                let values: Vec<f32> = v.iter().map(|&v| v as f32).collect();
                Ok((v, Tensor::from_slice(&values, [c], device)?))
            };
            let (scale, ts) = param(0, -2.0, 2.0)?;
            let (offset, to) = param(1, -1.0, 1.0)?;
            let (mean, tm) = param(2, -1.0, 1.0)?;
            let (var, tv) = param(3, 0.1, 3.0)?;
            let eps = 1e-3;
            let got = tx.batch_norm(&ts, &to, &tm, &tv, eps, *format)?;
            let want = crate::indices(&x.dims)
                .map(|i| {
                    let k = i[axis];
                    let factor = scale[k] / (var[k] + eps).sqrt();
                    let xv = at(&x, &i).to_f64();
                    let y = (xv - mean[k]) * factor + offset[k];
                    Expected {
                        value: data::round_to(dtype, Scalar::F64(y)),
                        scale: (xv * factor).abs() + (mean[k] * factor).abs() + offset[k].abs(),
                        terms: 1,
                    }
                })
                .collect();
            (got, want, Tolerance::Ulps(8.0))
        }
        Layer::LayerNorm(dims, gamma, beta) => {
            let c = dims[dims.len() - 1];
            let (x, tx) = inputs.next(dims, Domain::Finite)?;
            let (g, tg) = inputs.next(&[c], Domain::Finite)?;
            let (b, tb) = inputs.next(&[c], Domain::Finite)?;
            let got = tx.layer_norm(gamma.then_some(&tg), beta.then_some(&tb), 1e-3)?;
            let mut want = Vec::new();
            for row in x.values.chunks(c) {
                let row: Vec<f64> = row.iter().map(|v| v.to_f64()).collect();
                let mean = row.iter().sum::<f64>() / c as f64;
                let variance = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / c as f64;
                let inv = 1.0 / (variance + 1e-3).sqrt();
                // The mean's error scales with the row's magnitude, not with the mean.
                let magnitude = row.iter().map(|v| v.abs()).sum::<f64>() / c as f64;
                for (k, v) in row.iter().enumerate() {
                    let scale = if *gamma {
                        inv * g.values[k].to_f64()
                    } else {
                        inv
                    };
                    let shift = if *beta { b.values[k].to_f64() } else { 0.0 };
                    let y = (v - mean) * scale + shift;
                    want.push(Expected {
                        value: data::round_to(dtype, Scalar::F64(y)),
                        scale: (v.abs() + magnitude) * scale.abs() + shift.abs(),
                        terms: c,
                    });
                }
            }
            // The mean's and the variance's sums over the row, then the rsqrt's, the
            // products' and the sums' roundings.
            (got, want, Tolerance::Epilogue)
        }
        Layer::Softmax(dims, log) => {
            let (x, tx) = inputs.next(dims, Domain::Finite)?;
            let got = if *log {
                tx.log_softmax()?
            } else {
                tx.softmax()?
            };
            let last = *dims.last().unwrap_or(&1);
            let mut want = Vec::new();
            for row in x.values.chunks(last.max(1)) {
                let row: Vec<f64> = row.iter().map(|v| v.to_f64()).collect();
                let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let sum: f64 = row.iter().map(|v| (v - m).exp()).sum();
                for v in &row {
                    let (value, scale) = if *log {
                        (v - m - sum.ln(), (v - m).abs() + sum.ln().abs())
                    } else {
                        ((v - m).exp() / sum, ((v - m).exp() / sum).abs())
                    };
                    want.push(Expected {
                        value: data::round_to(dtype, Scalar::F64(value)),
                        scale,
                        terms: 1,
                    });
                }
            }
            (got, want, Tolerance::Ulps(8.0))
        }
        Layer::Pad(dims, paddings, value) => {
            let (x, tx) = inputs.next(dims, Domain::Finite)?;
            let got = tx.pad(paddings, *value)?;
            let out: Vec<usize> = dims
                .iter()
                .zip(paddings)
                .map(|(d, (a, b))| d + a + b)
                .collect();
            let fill = data::round_to(dtype, crate::reference::cast(*value, dtype).value);
            let want = crate::indices(&out)
                .map(|i| {
                    let source: Option<Vec<usize>> = i
                        .iter()
                        .zip(paddings)
                        .zip(dims)
                        .map(|((&i, &(a, _)), &d)| i.checked_sub(a).filter(|&j| j < d))
                        .collect();
                    exact(source.map_or(fill, |s| at(&x, &s)))
                })
                .collect();
            (got, want, Tolerance::Exact)
        }
        Layer::MirrorPad(dims, paddings, mode) => {
            let (x, tx) = inputs.next(dims, Domain::Finite)?;
            let got = tx.mirror_pad(paddings, *mode)?;
            let out: Vec<usize> = dims
                .iter()
                .zip(paddings)
                .map(|(d, (a, b))| d + a + b)
                .collect();
            let skip = i64::from(*mode == MirrorMode::Reflect);
            let want = crate::indices(&out)
                .map(|i| {
                    let source: Vec<usize> = i
                        .iter()
                        .zip(paddings)
                        .zip(dims)
                        .map(|((&i, &(a, _)), &d)| {
                            let (j, d) = (i as i64 - a as i64, d as i64);
                            (if j < 0 {
                                -j - 1 + skip
                            } else if j >= d {
                                2 * d - j - 1 - skip
                            } else {
                                j
                            }) as usize
                        })
                        .collect();
                    exact(at(&x, &source))
                })
                .collect();
            (got, want, Tolerance::Exact)
        }
        Layer::Concat(shapes, axis) => {
            let mut parts = Vec::new();
            for dims in shapes {
                parts.push(inputs.next(dims, Domain::Finite)?);
            }
            let refs: Vec<&Tensor> = parts.iter().map(|(_, t)| t).collect();
            let got = Tensor::concat(&refs, *axis)?;
            let a = axis.rem_euclid(shapes[0].len() as i64) as usize;
            let want = concat_reference(&parts.iter().map(|(v, _)| v).collect::<Vec<_>>(), a);
            (got, want, Tolerance::Exact)
        }
        Layer::Stack(n, dims, axis) => {
            let mut parts = Vec::new();
            for _ in 0..*n {
                parts.push(inputs.next(dims, Domain::Finite)?);
            }
            let refs: Vec<&Tensor> = parts.iter().map(|(_, t)| t).collect();
            let got = Tensor::stack(&refs, *axis)?;
            let a = *axis as usize;
            let mut out = dims.clone();
            out.insert(a, *n);
            let want = crate::indices(&out)
                .map(|i| {
                    let mut inner = i.clone();
                    let k = inner.remove(a);
                    exact(at(&parts[k].0, &inner))
                })
                .collect();
            (got, want, Tolerance::Exact)
        }
        Layer::StridedSlice(dims, spec) => {
            let (x, tx) = inputs.next(dims, Domain::Finite)?;
            let got = tx.strided_slice(spec)?;
            let plan = spec.resolve(dims)?;
            let out = plan.output_dims();
            let want = crate::indices(&out)
                .map(|i| {
                    let mut source: Vec<usize> = plan.dims.iter().map(|d| d.start).collect();
                    for (o, slot) in i.iter().zip(&plan.output) {
                        if let Some(d) = slot {
                            let dim = plan.dims[*d];
                            source[*d] = (dim.start as isize + *o as isize * dim.step) as usize;
                        }
                    }
                    exact(at(&x, &source))
                })
                .collect();
            (got, want, Tolerance::Exact)
        }
        Layer::Tile(dims, multiples) => {
            let (x, tx) = inputs.next(dims, Domain::Finite)?;
            let got = tx.tile(multiples)?;
            let out: Vec<usize> = dims.iter().zip(multiples).map(|(d, m)| d * m).collect();
            let want = crate::indices(&out)
                .map(|i| {
                    let source: Vec<usize> = i.iter().zip(dims).map(|(i, d)| i % d).collect();
                    exact(at(&x, &source))
                })
                .collect();
            (got, want, Tolerance::Exact)
        }
        Layer::Gather {
            params,
            dims,
            indices,
            axis,
            batch_dims,
        } => {
            let (x, tx) = inputs.next(params, Domain::Finite)?;
            let ti = Tensor::from_slice(indices, dims.as_slice(), device)?;
            let got = tx.gather(&ti, *axis, *batch_dims)?;
            let a = axis.rem_euclid(params.len() as i64) as usize;
            let b = *batch_dims as usize;
            let mut out = params[..a].to_vec();
            out.extend_from_slice(&dims[b..]);
            out.extend_from_slice(&params[a + 1..]);
            let index_rank = dims.len() - b;
            let want = crate::indices(&out)
                .map(|o| {
                    // [batch.., middle.., picked.., inner..]
                    let mut at_index: Vec<usize> = o[..b].to_vec();
                    at_index.extend_from_slice(&o[a..a + index_rank]);
                    let picked = indices[at_index
                        .iter()
                        .zip(dims.iter())
                        .fold(0, |flat, (&i, &d)| flat * d + i)];
                    let mut source = o[..a].to_vec();
                    source.push(picked as usize);
                    source.extend_from_slice(&o[a + index_rank..]);
                    exact(at(&x, &source))
                })
                .collect();
            (got, want, Tolerance::Exact)
        }
        Layer::OneHot(indices, depth, axis) => {
            let ti = Tensor::from_slice(indices, [indices.len()], device)?;
            let (on, off) = (Scalar::I64(1), Scalar::I64(0));
            let got = ti.one_hot(*depth, on, off, *axis, dtype)?;
            let first = *axis == 0;
            let out = if first {
                vec![*depth, indices.len()]
            } else {
                vec![indices.len(), *depth]
            };
            let want = crate::indices(&out)
                .map(|o| {
                    let (i, d) = if first { (o[1], o[0]) } else { (o[0], o[1]) };
                    let value = if indices[i] == d as i64 { on } else { off };
                    exact(crate::reference::cast(value, dtype).value)
                })
                .collect();
            (got, want, Tolerance::Exact)
        }
        layer @ (Layer::Reverse(..)
        | Layer::BroadcastTo(..)
        | Layer::SpaceBatch { .. }
        | Layer::Resize { .. }
        | Layer::Einsum(..)) => super::keras::execute(layer, &mut inputs)?,
        Layer::Split(dims, sizes, axis) => {
            let (x, tx) = inputs.next(dims, Domain::Finite)?;
            let pieces = tx.split_sizes(sizes, *axis)?;
            // Joined back in reverse: every piece must hold its own run.
            let reversed: Vec<&Tensor> = pieces.iter().rev().collect();
            let got = Tensor::concat(&reversed, *axis)?;
            let a = axis.rem_euclid(dims.len() as i64) as usize;
            let mut bounds = vec![0usize];
            for p in &pieces {
                bounds.push(bounds.last().unwrap_or(&0) + p.dims()[a]);
            }
            let mut runs: Vec<Values> = Vec::new();
            for k in 0..pieces.len() {
                let mut run_dims = dims.clone();
                run_dims[a] = bounds[k + 1] - bounds[k];
                let values = crate::indices(&run_dims)
                    .map(|mut i| {
                        i[a] += bounds[k];
                        at(&x, &i)
                    })
                    .collect();
                runs.push(Values {
                    dims: run_dims,
                    values,
                });
            }
            let runs: Vec<&Values> = runs.iter().rev().collect();
            (got, concat_reference(&runs, a), Tolerance::Exact)
        }
    };
    let values = got.to_scalars()?;
    if values.len() != want.len() {
        return Ok(crate::fail(&format!(
            "{} elements (shape {}), expected {}",
            values.len(),
            got.shape(),
            want.len()
        )));
    }
    let mut max_error = 0.0f64;
    for (i, (g, w)) in values.iter().zip(&want).enumerate() {
        let (ok, error) = check(got.dtype(), tolerance, *g, w);
        max_error = max_error.max(error);
        if !ok {
            return Ok(crate::fail(&format!(
                "element {i}: got {g:?}, expected {:?} (tolerance {tolerance:?})",
                w.value
            )));
        }
    }
    Ok(Outcome::Pass { max_error })
}
