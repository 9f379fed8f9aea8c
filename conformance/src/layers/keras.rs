//! The cases of the ops Keras's models need (issue 48): `ReverseV2`, `BroadcastTo`,
//! `SpaceToBatchND` / `BatchToSpaceND`, the two resizes and `Einsum`, each against a naive
//! reference that walks the output and reads the input where TensorFlow's definition says.

use std::collections::HashMap;

use polytensor_core::{DataType, ResizeOptions, Result, Scalar, Tensor};

use super::run::{at, exact, Inputs};
use super::Layer;
use crate::data::Domain;
use crate::reference::{self, Expected};
use crate::tolerance::Tolerance;

/// What a case gives to compare: the device's result, the expected elements, the tolerance.
pub(super) type Compared = (Tensor, Vec<Expected>, Tolerance);

/// Run `layer`, one of this module's.
pub(super) fn execute(layer: &Layer, inputs: &mut Inputs<'_>) -> Result<Compared> {
    match layer {
        Layer::Reverse(dims, axes) => reverse(inputs, dims, axes),
        Layer::BroadcastTo(from, to) => broadcast_to(inputs, from, to),
        Layer::SpaceBatch {
            dims,
            block,
            edges,
            to_batch,
        } => space_batch(inputs, dims, block, edges, *to_batch),
        Layer::Resize {
            image,
            size,
            options,
            bilinear,
        } => resize(inputs, image, *size, *options, *bilinear),
        Layer::Einsum(equation, dims) => einsum(inputs, equation, dims),
        other => Err(polytensor_core::Error::invalid(format!(
            "{} is not one of issue 48's layer cases",
            other.name()
        ))),
    }
}

fn reverse(inputs: &mut Inputs<'_>, dims: &[usize], axes: &[i64]) -> Result<Compared> {
    let (x, tx) = inputs.next(dims, Domain::Finite)?;
    let got = tx.reverse(axes)?;
    let flipped: Vec<usize> = axes
        .iter()
        .map(|a| a.rem_euclid(dims.len() as i64) as usize)
        .collect();
    let want = crate::indices(dims)
        .map(|mut i| {
            for &a in &flipped {
                i[a] = dims[a] - 1 - i[a];
            }
            exact(at(&x, &i))
        })
        .collect();
    Ok((got, want, Tolerance::Exact))
}

fn broadcast_to(inputs: &mut Inputs<'_>, from: &[usize], to: &[usize]) -> Result<Compared> {
    let (x, tx) = inputs.next(from, Domain::Finite)?;
    let got = tx.broadcast_to(to)?;
    let lead = to.len() - from.len();
    let want = crate::indices(to)
        .map(|i| {
            let source: Vec<usize> = from
                .iter()
                .enumerate()
                .map(|(d, &size)| if size == 1 { 0 } else { i[lead + d] })
                .collect();
            exact(at(&x, &source))
        })
        .collect();
    Ok((got, want, Tolerance::Exact))
}

/// TensorFlow's definitions: `SpaceToBatchND` output `[o * batch + b, y.., r..]` is the
/// padded input at `[b, y * block + o.., r..]` (`o` the block offset, row-major); its
/// inverse reads `BatchToSpaceND` output `[b, x.., r..]` from input
/// `[o * batch + b, (x + crop) / block.., r..]` with `o = (x + crop) % block`.
fn space_batch(
    inputs: &mut Inputs<'_>,
    dims: &[usize],
    block: &[usize],
    edges: &[(usize, usize)],
    to_batch: bool,
) -> Result<Compared> {
    let (x, tx) = inputs.next(dims, Domain::Finite)?;
    let m = block.len();
    let blocks: usize = block.iter().product();
    let zero = reference::cast(Scalar::I64(0), inputs.dtype()).value;
    if to_batch {
        let got = tx.space_to_batch_nd(block, edges)?;
        let mut out = vec![dims[0] * blocks];
        for d in 0..m {
            out.push((dims[d + 1] + edges[d].0 + edges[d].1) / block[d]);
        }
        out.extend_from_slice(&dims[m + 1..]);
        let want = crate::indices(&out)
            .map(|i| {
                let (mut o, b) = (i[0] / dims[0], i[0] % dims[0]);
                let mut source = vec![b];
                for d in (0..m).rev() {
                    let offset = o % block[d];
                    o /= block[d];
                    let padded = i[d + 1] * block[d] + offset;
                    source.insert(1, padded.wrapping_sub(edges[d].0));
                }
                source.extend_from_slice(&i[m + 1..]);
                let inside = (0..m).all(|d| source[d + 1] < dims[d + 1]);
                exact(if inside { at(&x, &source) } else { zero })
            })
            .collect();
        return Ok((got, want, Tolerance::Exact));
    }
    let got = tx.batch_to_space_nd(block, edges)?;
    let batch = dims[0] / blocks;
    let mut out = vec![batch];
    for d in 0..m {
        out.push(dims[d + 1] * block[d] - edges[d].0 - edges[d].1);
    }
    out.extend_from_slice(&dims[m + 1..]);
    let want = crate::indices(&out)
        .map(|i| {
            let mut o = 0;
            let mut source = vec![0];
            for d in 0..m {
                let position = i[d + 1] + edges[d].0;
                o = o * block[d] + position % block[d];
                source.push(position / block[d]);
            }
            source[0] = o * batch + i[0];
            source.extend_from_slice(&i[m + 1..]);
            exact(at(&x, &source))
        })
        .collect();
    Ok((got, want, Tolerance::Exact))
}

/// TensorFlow's source position of output `o` along a dim of `input` resized to `output`,
/// in f32 as its kernels compute it.
fn source(o: usize, input: usize, output: usize, options: ResizeOptions) -> f32 {
    let scale = if options.align_corners && output > 1 {
        (input as f32 - 1.0) / (output as f32 - 1.0)
    } else {
        input as f32 / output as f32
    };
    if options.half_pixel_centers {
        (o as f32 + 0.5) * scale
    } else {
        o as f32 * scale
    }
}

fn resize(
    inputs: &mut Inputs<'_>,
    image: &[usize],
    size: [usize; 2],
    options: ResizeOptions,
    bilinear: bool,
) -> Result<Compared> {
    let (x, tx) = inputs.next(image, Domain::Finite)?;
    let [n, h, w, c] = [image[0], image[1], image[2], image[3]];
    let out = [n, size[0], size[1], c];
    if !bilinear {
        let got = tx.resize_nearest(size, options)?;
        let pick = |o: usize, input: usize, output: usize| {
            let at = source(o, input, output, options);
            let at = if options.align_corners {
                at.round()
            } else {
                at.floor()
            };
            (at as usize).min(input - 1)
        };
        let want = crate::indices(&out)
            .map(|i| {
                let (y, z) = (pick(i[1], h, size[0]), pick(i[2], w, size[1]));
                exact(at(&x, &[i[0], y, z, i[3]]))
            })
            .collect();
        return Ok((got, want, Tolerance::Exact));
    }
    let got = tx.resize_bilinear(size, options)?;
    // The lower and upper source rows (columns) and the weight of the upper.
    let lerp = |o: usize, input: usize, output: usize| {
        let mut at = source(o, input, output, options);
        if options.half_pixel_centers {
            at -= 0.5;
        }
        let low = (at.floor() as i64).max(0) as usize;
        let high = (at.ceil() as usize).min(input - 1);
        (low, high, f64::from(at - at.floor()))
    };
    let want = crate::indices(&out)
        .map(|i| {
            let (top, bottom, dy) = lerp(i[1], h, size[0]);
            let (left, right, dx) = lerp(i[2], w, size[1]);
            let v = |y: usize, z: usize| at(&x, &[i[0], y, z, i[3]]).to_f64();
            let (tl, tr, bl, br) = (
                v(top, left),
                v(top, right),
                v(bottom, left),
                v(bottom, right),
            );
            let upper = tl + (tr - tl) * dx;
            let lower = bl + (br - bl) * dx;
            let value = upper + (lower - upper) * dy;
            Expected {
                value: crate::data::round_to(DataType::Float, Scalar::F64(value)),
                scale: tl.abs().max(tr.abs()).max(bl.abs()).max(br.abs()),
                // Three differences, three products, three sums.
                terms: 9,
            }
        })
        .collect();
    Ok((got, want, Tolerance::Accumulated))
}

/// The naive einsum: each output element the dot product, over every value of the labels
/// the output lacks, of the operands' elements at those labels.
fn einsum(inputs: &mut Inputs<'_>, equation: &str, dims: &[Vec<usize>]) -> Result<Compared> {
    let mut operands = Vec::new();
    let mut tensors = Vec::new();
    for d in dims {
        let (values, tensor) = inputs.next(d, Domain::Finite)?;
        operands.push(values);
        tensors.push(tensor);
    }
    let refs: Vec<&Tensor> = tensors.iter().collect();
    let got = Tensor::einsum(equation, &refs)?;
    let (left, output) = equation.split_once("->").unwrap_or((equation, ""));
    let labels: Vec<Vec<char>> = left.split(',').map(|l| l.chars().collect()).collect();
    let mut sizes = HashMap::new();
    for (operand, d) in labels.iter().zip(dims) {
        for (&label, &size) in operand.iter().zip(d) {
            sizes.insert(label, size);
        }
    }
    let output: Vec<char> = output.chars().collect();
    let mut summed: Vec<char> = labels
        .iter()
        .flatten()
        .copied()
        .filter(|l| !output.contains(l))
        .collect();
    summed.sort_unstable();
    summed.dedup();
    let out_dims: Vec<usize> = output.iter().map(|l| sizes[l]).collect();
    let summed_dims: Vec<usize> = summed.iter().map(|l| sizes[l]).collect();
    let want = crate::indices(&out_dims)
        .map(|o| {
            let mut terms: Vec<Vec<Scalar>> = vec![Vec::new(); operands.len()];
            for s in crate::indices(&summed_dims) {
                let value_of = |label: &char| match output.iter().position(|l| l == label) {
                    Some(k) => o[k],
                    None => s[summed.iter().position(|l| l == label).unwrap_or(0)],
                };
                for (k, (operand, values)) in labels.iter().zip(&operands).enumerate() {
                    let index: Vec<usize> = operand.iter().map(value_of).collect();
                    terms[k].push(at(values, &index));
                }
            }
            match terms.as_slice() {
                [a, b] => reference::dot(inputs.dtype(), a, b),
                [a] => {
                    let ones = vec![Scalar::F64(1.0); a.len()];
                    reference::dot(inputs.dtype(), a, &ones)
                }
                _ => exact(Scalar::F64(f64::NAN)),
            }
        })
        .collect();
    Ok((got, want, Tolerance::Accumulated))
}
