//! [`ReducedAxes`]: a layout split into the dims a reduction keeps and the dims it sums.

use crate::error::{Error, Result};
use crate::layout::Layout;

/// A layout split for a reduction: the kept dims and the reduced dims, each with the
/// layout's strides along them, in the layout's order.
///
/// ```
/// use polytensor_core::{plan::ReducedAxes, Layout, TensorShape};
/// let layout = Layout::contiguous(TensorShape::new(&[2, 3, 4]).unwrap());
/// let split = ReducedAxes::split(&layout, &[1], 8).unwrap();
/// assert_eq!((split.kept, split.kept_strides), (vec![2, 4], vec![12, 1]));
/// assert_eq!((split.reduced, split.reduced_strides), (vec![3], vec![4]));
/// assert!(ReducedAxes::split(&layout, &[1], 6).is_err()); // output of the wrong size
/// assert!(ReducedAxes::split(&layout, &[2, 1], 8).is_err()); // axes out of order
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReducedAxes {
    /// Dims that stay, in order (the output's elements, row-major).
    pub kept: Vec<usize>,
    /// The layout's strides along `kept`.
    pub kept_strides: Vec<isize>,
    /// Dims reduced over, in order.
    pub reduced: Vec<usize>,
    /// The layout's strides along `reduced`.
    pub reduced_strides: Vec<isize>,
}

impl ReducedAxes {
    /// Split `layout` by `axes` (sorted, distinct, in range) for an output of `outputs`
    /// elements, which must be the product of the kept dims.
    pub fn split(layout: &Layout, axes: &[usize], outputs: usize) -> Result<Self> {
        let dims = layout.shape().dims();
        if axes.windows(2).any(|w| w[0] >= w[1]) || axes.last().is_some_and(|&a| a >= dims.len()) {
            return Err(Error::invalid(format!(
                "reduction axes {axes:?} must be sorted, distinct and < {}",
                dims.len()
            )));
        }
        let mut split = ReducedAxes {
            kept: vec![],
            kept_strides: vec![],
            reduced: vec![],
            reduced_strides: vec![],
        };
        for (i, (&d, &s)) in dims.iter().zip(layout.strides()).enumerate() {
            let (to, strides) = if axes.contains(&i) {
                (&mut split.reduced, &mut split.reduced_strides)
            } else {
                (&mut split.kept, &mut split.kept_strides)
            };
            to.push(d);
            strides.push(s);
        }
        if split.kept.iter().product::<usize>() != outputs {
            return Err(Error::shape(
                "reduce",
                format!(
                    "an output of {outputs} elements for kept dims {:?}",
                    split.kept
                ),
            ));
        }
        Ok(split)
    }
}
