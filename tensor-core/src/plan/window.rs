//! The geometry of sliding-window ops (convolution, pooling) along one spatial dim, as
//! TensorFlow computes it (`GetWindowedOutputSizeVerbose`): the output size and the padding
//! before and after, for `VALID`, `SAME` and `EXPLICIT` padding.

use crate::error::{Error, Result};

/// How a window op pads its input (TensorFlow's `padding` attribute).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Padding {
    /// No padding: only windows that fit entirely in the input.
    Valid,
    /// `ceil(input / stride)` outputs, the padding split evenly with the odd element after.
    Same,
    /// The given `(before, after)` padding per spatial dim (TensorFlow's
    /// `explicit_paddings`, spatial pairs only).
    Explicit(Vec<(usize, usize)>),
}

impl Padding {
    /// The padding named by TensorFlow's attribute (`"VALID"`, `"SAME"`, `"EXPLICIT"`
    /// with its spatial pairs).
    pub fn from_name(name: &str, explicit: Vec<(usize, usize)>) -> Result<Self> {
        match name {
            "VALID" => Ok(Padding::Valid),
            "SAME" => Ok(Padding::Same),
            "EXPLICIT" => Ok(Padding::Explicit(explicit)),
            other => Err(Error::invalid(format!(
                "padding must be VALID, SAME or EXPLICIT, not {other:?}"
            ))),
        }
    }
}

/// Where the channels of an image tensor are (TensorFlow's `data_format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DataFormat {
    /// `[batch, spatial.., channels]`, TensorFlow's default.
    #[default]
    Nhwc,
    /// `[batch, channels, spatial..]`.
    Nchw,
}

impl DataFormat {
    /// The format TensorFlow's attribute names (`NHWC`, `NCHW`, and the 1-D/3-D spellings).
    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "NHWC" | "NWC" | "NDHWC" => Ok(DataFormat::Nhwc),
            "NCHW" | "NCW" | "NCDHW" => Ok(DataFormat::Nchw),
            other => Err(Error::invalid(format!("Unknown data format {other:?}"))),
        }
    }

    /// The axis of the channels in a tensor of `rank` dims.
    pub fn channel_axis(self, rank: usize) -> usize {
        match self {
            DataFormat::Nhwc => rank.saturating_sub(1),
            DataFormat::Nchw => 1.min(rank.saturating_sub(1)),
        }
    }
}

/// One spatial dim of a window op, resolved: the output size and the padding on each side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowDim {
    /// The number of windows (the output size).
    pub output: usize,
    /// Padding before the first input element.
    pub before: usize,
    /// Padding after the last input element.
    pub after: usize,
}

/// The window of one spatial dim: its size, stride and dilation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// The number of taps.
    pub size: usize,
    /// The step between windows.
    pub stride: usize,
    /// The step between taps (1: adjacent).
    pub dilation: usize,
}

impl Window {
    /// The span of the window in input elements: `(size - 1) * dilation + 1`.
    pub fn span(&self) -> Result<usize> {
        self.size
            .checked_sub(1)
            .and_then(|s| s.checked_mul(self.dilation))
            .and_then(|s| s.checked_add(1))
            .ok_or_else(|| Error::invalid("window size and dilation overflow"))
    }

    /// The output size and padding of this window over `input` elements with `padding`
    /// (`explicit` is this dim's pair for [`Padding::Explicit`]). Errors as TensorFlow's:
    /// a zero stride, size or dilation, or a window larger than the padded input.
    pub fn resolve(&self, input: usize, padding: &Padding, dim: usize) -> Result<WindowDim> {
        if self.stride == 0 || self.dilation == 0 || self.size == 0 {
            return Err(Error::invalid(format!(
                "window size, stride and dilation must be positive, got {}, {} and {}",
                self.size, self.stride, self.dilation
            )));
        }
        let span = self.span()?;
        let (output, before, after) = match padding {
            Padding::Valid => {
                let fits = input.checked_sub(span).map(|room| room / self.stride + 1);
                (fits, 0, 0)
            }
            Padding::Same => {
                let output = input.div_ceil(self.stride);
                let needed = output
                    .saturating_sub(1)
                    .saturating_mul(self.stride)
                    .saturating_add(span);
                let total = needed.saturating_sub(input);
                (Some(output), total / 2, total - total / 2)
            }
            Padding::Explicit(pairs) => {
                let &(before, after) = pairs.get(dim).ok_or_else(|| {
                    Error::invalid(format!("no explicit padding for spatial dim {dim}"))
                })?;
                let padded = input
                    .checked_add(before)
                    .and_then(|p| p.checked_add(after))
                    .ok_or_else(|| Error::invalid("explicit padding overflows"))?;
                let fits = padded.checked_sub(span).map(|room| room / self.stride + 1);
                (fits, before, after)
            }
        };
        let output = output.ok_or_else(|| {
            Error::invalid(format!(
                "Computed output size would be negative: the window spans {span} elements of \
                 an input of {input} (padded by {before} and {after})"
            ))
        })?;
        Ok(WindowDim {
            output,
            before,
            after,
        })
    }
}

/// A 2-D window op resolved for a device's direct kernel: an NHWC input of
/// `[batch, input[0], input[1], channels]`, the windows, the zero (or, for max pooling,
/// never winning) padding before each spatial dim, and the output's spatial size. The
/// output is `[batch, output[0], output[1], channels * filters]` for a depthwise
/// convolution, `[.., filters]` for a full one, and `[.., channels]` for pooling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowGeometry {
    /// Images.
    pub batch: usize,
    /// Input height and width.
    pub input: [usize; 2],
    /// Input channels.
    pub channels: usize,
    /// The window along height and width.
    pub windows: [Window; 2],
    /// Padding before the first row and column.
    pub before: [usize; 2],
    /// Output height and width.
    pub output: [usize; 2],
    /// Output channels of a full convolution, or filters per channel of a depthwise one
    /// (1 for pooling).
    pub filters: usize,
}

impl WindowGeometry {
    /// The elements of a product of dims, or an `Err` if it overflows.
    fn elements(dims: &[usize]) -> Result<usize> {
        dims.iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d))
            .ok_or_else(|| Error::invalid("a window op's size overflows"))
    }

    /// The elements of the input.
    pub fn input_elements(&self) -> Result<usize> {
        Self::elements(&[self.batch, self.input[0], self.input[1], self.channels])
    }

    /// The elements of an output of `channels` channels.
    pub fn output_elements(&self, channels: usize) -> Result<usize> {
        Self::elements(&[self.batch, self.output[0], self.output[1], channels])
    }

    /// The elements of a convolution's filter, `[k_h, k_w, channels, filters]`.
    pub fn filter_elements(&self) -> Result<usize> {
        let [h, w] = self.windows;
        Self::elements(&[h.size, w.size, self.channels, self.filters])
    }

    /// The output channels of a convolution: `channels * filters` for a depthwise one,
    /// `filters` for a full one.
    pub fn conv_channels(&self, depthwise: bool) -> Result<usize> {
        if depthwise {
            Self::elements(&[self.channels, self.filters])
        } else {
            Ok(self.filters)
        }
    }

    /// This pooling geometry with each window cut to the taps that reach the image for
    /// some output: a tap that lies in the padding for every output changes no result
    /// (pooling skips padding), so a window far larger than the image (2^40 taps) costs
    /// what one covering the image does. Every backend's kernel gets the same geometry.
    pub fn pooling_taps(mut self) -> Self {
        for dim in 0..2 {
            let (w, before, input) = (self.windows[dim], self.before[dim], self.input[dim]);
            let last_start = self.output[dim].saturating_sub(1).saturating_mul(w.stride);
            // Tap k of output o is at o * stride + k * dilation - before: it reaches the
            // image only for k * dilation in [before - last_start, before + input).
            let first = before.saturating_sub(last_start) / w.dilation;
            let end = before
                .saturating_add(input)
                .div_ceil(w.dilation)
                .min(w.size);
            if first < end && (first > 0 || end < w.size) {
                self.windows[dim].size = end - first;
                self.before[dim] = before - first * w.dilation;
            }
        }
        self
    }

    /// The input position of tap `tap` of output position `out` along spatial dim `dim`,
    /// or `None` where it falls in the padding.
    #[inline]
    pub fn tap(&self, dim: usize, out: usize, tap: usize) -> Option<usize> {
        let w = &self.windows[dim];
        (out * w.stride + tap * w.dilation)
            .checked_sub(self.before[dim])
            .filter(|&p| p < self.input[dim])
    }
}

/// The output sizes and paddings of a window op over `spatial` input sizes.
pub fn resolve_windows(
    spatial: &[usize],
    windows: &[Window],
    padding: &Padding,
) -> Result<Vec<WindowDim>> {
    if let Padding::Explicit(pairs) = padding {
        if pairs.len() != spatial.len() {
            return Err(Error::invalid(format!(
                "explicit padding has {} pairs for {} spatial dims",
                pairs.len(),
                spatial.len()
            )));
        }
    }
    spatial
        .iter()
        .zip(windows)
        .enumerate()
        .map(|(dim, (&input, window))| window.resolve(input, padding, dim))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(size: usize, stride: usize, dilation: usize) -> Window {
        Window {
            size,
            stride,
            dilation,
        }
    }

    #[test]
    fn sizes_and_paddings_are_tensorflows() {
        let same = |input, w: Window| w.resolve(input, &Padding::Same, 0).unwrap();
        let valid = |input, w: Window| w.resolve(input, &Padding::Valid, 0).unwrap();
        // 28 by 3x3 SAME stride 1: 28 outputs, one on each side.
        assert_eq!(
            same(28, window(3, 1, 1)),
            WindowDim {
                output: 28,
                before: 1,
                after: 1
            }
        );
        // 64 by 3x3 stride 2 SAME: 32 outputs, the odd padding after.
        assert_eq!(
            same(64, window(3, 2, 1)),
            WindowDim {
                output: 32,
                before: 0,
                after: 1
            }
        );
        // 14 by 3x3 stride 2 VALID: 6.
        assert_eq!(valid(14, window(3, 2, 1)).output, 6);
        // Dilation 2 spans 5: 7 - 5 + 1 = 3.
        assert_eq!(valid(7, window(3, 1, 2)).output, 3);
        // Stride larger than the window.
        assert_eq!(valid(10, window(2, 3, 1)).output, 3);
        let explicit = Padding::Explicit(vec![(2, 1)]);
        assert_eq!(
            window(3, 1, 1).resolve(4, &explicit, 0).unwrap(),
            WindowDim {
                output: 5,
                before: 2,
                after: 1
            }
        );
        assert!(window(5, 1, 1).resolve(4, &Padding::Valid, 0).is_err());
        assert!(window(3, 0, 1).resolve(4, &Padding::Same, 0).is_err());
    }

    /// Cutting a pooling window to the taps that reach the image changes no tap that
    /// does: every (output, tap) pair in the image before is one after, at the same input
    /// position.
    #[test]
    fn pooling_windows_keep_exactly_the_taps_in_the_image() {
        let cases = [
            (5, window(1 << 12, 1, 1), Padding::Same),
            (7, window(9, 2, 1), Padding::Same),
            (6, window(4, 1, 3), Padding::Same),
            (9, window(3, 2, 2), Padding::Valid),
            (4, window(6, 1, 1), Padding::Explicit(vec![(5, 4)])),
        ];
        for (input, w, padding) in cases {
            let d = w.resolve(input, &padding, 0).unwrap();
            let geometry = WindowGeometry {
                batch: 1,
                input: [input, 1],
                channels: 1,
                windows: [w, window(1, 1, 1)],
                before: [d.before, 0],
                output: [d.output, 1],
                filters: 1,
            };
            let cut = geometry.pooling_taps();
            // At most the taps that reach the image from the first or the last window.
            let reach = (input + (d.output - 1) * w.stride) / w.dilation + 1;
            assert!(cut.windows[0].size <= reach, "{w:?}: {:?}", cut.windows[0]);
            let taps = |g: &WindowGeometry, o: usize| -> Vec<usize> {
                (0..g.windows[0].size)
                    .filter_map(|k| g.tap(0, o, k))
                    .collect()
            };
            for o in 0..d.output {
                assert_eq!(
                    taps(&geometry, o),
                    taps(&cut, o),
                    "{w:?} {padding:?} output {o}"
                );
            }
        }
        // 2^40 taps over 5 elements: the 9 that reach the image from one of 5 outputs.
        let w = window(1 << 40, 1, 1);
        let d = w.resolve(5, &Padding::Same, 0).unwrap();
        let huge = WindowGeometry {
            batch: 1,
            input: [5, 1],
            channels: 1,
            windows: [w, window(1, 1, 1)],
            before: [d.before, 0],
            output: [d.output, 1],
            filters: 1,
        }
        .pooling_taps();
        assert_eq!(huge.windows[0].size, 9);
        for o in 0..5 {
            let taps: Vec<usize> = (0..9).filter_map(|k| huge.tap(0, o, k)).collect();
            assert_eq!(taps, [0, 1, 2, 3, 4], "output {o}");
        }
    }
}
