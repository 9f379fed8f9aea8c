//! The naive references of the layer cases: direct convolution and pooling over every
//! output pixel and tap, and concatenation.

use polytensor_core::plan::window::{resolve_windows, DataFormat, Padding, Window, WindowDim};
use polytensor_core::{DataType, Result, Scalar};

use super::run::{at, exact};
use crate::data::{self};
use crate::reference::{self, Expected};
use crate::Values;

/// The windows of both spatial dims of an image of `dims` in `format`: `(input size,
/// window)`.
pub(super) fn spatial(
    format: DataFormat,
    dims: &[usize],
    size: [usize; 2],
    strides: [usize; 2],
    dilations: [usize; 2],
) -> [(usize, Window); 2] {
    let (h, w) = match format {
        DataFormat::Nhwc => (1, 2),
        DataFormat::Nchw => (2, 3),
    };
    [(dims[h], 0), (dims[w], 1)].map(|(input, k)| {
        (
            input,
            Window {
                size: size[k],
                stride: strides[k],
                dilation: dilations[k],
            },
        )
    })
}

/// The output sizes and paddings of `windows` (each `(input size, window)`) with `padding`.
pub(super) fn resolve(windows: &[(usize, Window); 2], padding: &Padding) -> Result<Vec<WindowDim>> {
    resolve_windows(
        &[windows[0].0, windows[1].0],
        &[windows[0].1, windows[1].1],
        padding,
    )
}

/// The output dims, in `format`, of a window op on an image of `image` dims with these
/// `windows`, `padding` and output `channels`.
pub(super) fn output_dims(
    format: DataFormat,
    image: &[usize],
    windows: &[(usize, Window); 2],
    padding: &Padding,
    channels: usize,
) -> Result<[usize; 4]> {
    let resolved = resolve(windows, padding)?;
    let [oh, ow] = [resolved[0].output, resolved[1].output];
    Ok(match format {
        DataFormat::Nhwc => [image[0], oh, ow, channels],
        DataFormat::Nchw => [image[0], channels, oh, ow],
    })
}

/// An image in NHWC order: index `[n, h, w, c]` of `x` stored in `format`.
pub(super) fn pixel(x: &Values, format: DataFormat, [n, h, w, c]: [usize; 4]) -> Scalar {
    match format {
        DataFormat::Nhwc => at(x, &[n, h, w, c]),
        DataFormat::Nchw => at(x, &[n, c, h, w]),
    }
}

/// Output dims `[n, oh, ow, c]` in `format`, walked in that format's row-major order, each
/// index given back as NHWC.
pub(super) fn output_walk(format: DataFormat, [n, oh, ow, c]: [usize; 4]) -> Vec<[usize; 4]> {
    match format {
        DataFormat::Nhwc => crate::indices(&[n, oh, ow, c])
            .map(|i| [i[0], i[1], i[2], i[3]])
            .collect(),
        DataFormat::Nchw => crate::indices(&[n, c, oh, ow])
            .map(|i| [i[0], i[2], i[3], i[1]])
            .collect(),
    }
}

/// The input position of tap `k` of output `o` along one dim, if inside the input.
pub(super) fn tap(
    o: usize,
    k: usize,
    window: &Window,
    before: usize,
    input: usize,
) -> Option<usize> {
    (o * window.stride + k * window.dilation)
        .checked_sub(before)
        .filter(|&p| p < input)
}

/// The naive convolution: a dot product of the taps inside the image per output element;
/// with an `epilogue` of per-channel scales and shifts, `relu6(dot * scale + shift)`
/// computed exactly and rounded once.
#[allow(clippy::too_many_arguments)]
pub(super) fn reference_conv(
    dtype: DataType,
    x: &Values,
    f: &Values,
    format: DataFormat,
    windows: &[(usize, Window); 2],
    padding: &Padding,
    depthwise: bool,
    epilogue: Option<(&Values, &Values)>,
) -> Result<Vec<Expected>> {
    let resolved = resolve(windows, padding)?;
    let [kh, kw, cin, cout] = [f.dims[0], f.dims[1], f.dims[2], f.dims[3]];
    let n = x.dims[0];
    let out_c = if depthwise { cin * cout } else { cout };
    let channels = match format {
        DataFormat::Nhwc => x.dims[3],
        DataFormat::Nchw => x.dims[1],
    };
    let groups = if depthwise { 1 } else { channels / cin.max(1) };
    let dims = [n, resolved[0].output, resolved[1].output, out_c];
    Ok(output_walk(format, dims)
        .into_iter()
        .map(|[b, oh, ow, oc]| {
            let (mut xs, mut ws) = (Vec::new(), Vec::new());
            for i in 0..kh {
                for j in 0..kw {
                    let (Some(h), Some(w)) = (
                        tap(oh, i, &windows[0].1, resolved[0].before, windows[0].0),
                        tap(ow, j, &windows[1].1, resolved[1].before, windows[1].0),
                    ) else {
                        continue;
                    };
                    if depthwise {
                        let (c, m) = (oc / cout, oc % cout);
                        xs.push(pixel(x, format, [b, h, w, c]));
                        ws.push(at(f, &[i, j, c, m]));
                    } else {
                        // A grouped convolution: output channel `oc` reads its group's
                        // input channels.
                        let first = oc / (cout / groups).max(1) * cin;
                        for c in 0..cin {
                            xs.push(pixel(x, format, [b, h, w, first + c]));
                            ws.push(at(f, &[i, j, c, oc]));
                        }
                    }
                }
            }
            let Some((scale, shift)) = epilogue else {
                let mut expected = reference::dot(dtype, &xs, &ws);
                // A depthwise product is rounded before it is summed.
                expected.terms *= 2;
                return expected;
            };
            let exact = reference::dot(DataType::Double, &xs, &ws);
            let (a, b) = (scale.values[oc].to_f64(), shift.values[oc].to_f64());
            let y = exact.value.to_f64() * a + b;
            Expected {
                value: data::round_to(dtype, Scalar::F64(y.clamp(0.0, 6.0))),
                scale: exact.scale * a.abs() + b.abs(),
                // The products' and sums' roundings, then the scale's and the shift's.
                terms: exact.terms * 2 + 2,
            }
        })
        .collect())
}

/// The naive transposed convolution: per image element, the dot product of the gradient
/// pixels whose windows read it (every output pixel and tap that lands there) with the
/// filter.
pub(super) fn reference_conv_transpose(
    dtype: DataType,
    dy: &Values,
    f: &Values,
    format: DataFormat,
    windows: &[(usize, Window); 2],
    padding: &Padding,
    batch: usize,
) -> Result<Vec<Expected>> {
    let resolved = resolve(windows, padding)?;
    let [kh, kw, cin, cout] = [f.dims[0], f.dims[1], f.dims[2], f.dims[3]];
    let dims = [batch, windows[0].0, windows[1].0, cin];
    Ok(output_walk(format, dims)
        .into_iter()
        .map(|[b, h, w, c]| {
            let (mut xs, mut ws) = (Vec::new(), Vec::new());
            for oh in 0..resolved[0].output {
                for ow in 0..resolved[1].output {
                    for i in 0..kh {
                        for j in 0..kw {
                            let hit = tap(oh, i, &windows[0].1, resolved[0].before, windows[0].0)
                                == Some(h)
                                && tap(ow, j, &windows[1].1, resolved[1].before, windows[1].0)
                                    == Some(w);
                            if hit {
                                for o in 0..cout {
                                    xs.push(pixel(dy, format, [b, oh, ow, o]));
                                    ws.push(at(f, &[i, j, c, o]));
                                }
                            }
                        }
                    }
                }
            }
            reference::dot(dtype, &xs, &ws)
        })
        .collect())
}

/// The naive pooling: the largest element, or the mean of the elements inside the image.
pub(super) fn reference_pool(
    dtype: DataType,
    x: &Values,
    format: DataFormat,
    windows: &[(usize, Window); 2],
    padding: &Padding,
    max: bool,
) -> Result<Vec<Expected>> {
    let resolved = resolve(windows, padding)?;
    let c = match format {
        DataFormat::Nhwc => x.dims[3],
        DataFormat::Nchw => x.dims[1],
    };
    let dims = [x.dims[0], resolved[0].output, resolved[1].output, c];
    Ok(output_walk(format, dims)
        .into_iter()
        .map(|[b, oh, ow, ch]| {
            let mut taps = Vec::new();
            for i in 0..windows[0].1.size {
                for j in 0..windows[1].1.size {
                    if let (Some(h), Some(w)) = (
                        tap(oh, i, &windows[0].1, resolved[0].before, windows[0].0),
                        tap(ow, j, &windows[1].1, resolved[1].before, windows[1].0),
                    ) {
                        taps.push(pixel(x, format, [b, h, w, ch]));
                    }
                }
            }
            if max {
                let best = taps.iter().copied().reduce(|a, b| {
                    let (fa, fb) = (a.to_f64(), b.to_f64());
                    // -0 ranks below +0, as the shared semantics order them.
                    if fb > fa || (fb == fa && fa.is_sign_negative() && !fb.is_sign_negative()) {
                        b
                    } else {
                        a
                    }
                });
                exact(best.unwrap_or(Scalar::F64(f64::NEG_INFINITY)))
            } else {
                let sum: f64 = taps.iter().map(|v| v.to_f64()).sum();
                let scale: f64 = taps.iter().map(|v| v.to_f64().abs()).sum::<f64>();
                let count = taps.len().max(1) as f64;
                Expected {
                    value: data::round_to(dtype, Scalar::F64(sum / count)),
                    scale: scale / count,
                    terms: taps.len() + 2,
                }
            }
        })
        .collect())
}

/// `parts` joined along `axis`.
pub(super) fn concat_reference(parts: &[&Values], axis: usize) -> Vec<Expected> {
    let mut out = parts[0].dims.clone();
    out[axis] = parts.iter().map(|p| p.dims[axis]).sum();
    crate::indices(&out)
        .map(|mut i| {
            let mut k = 0;
            while i[axis] >= parts[k].dims[axis] {
                i[axis] -= parts[k].dims[axis];
                k += 1;
            }
            exact(at(parts[k], &i))
        })
        .collect()
}
