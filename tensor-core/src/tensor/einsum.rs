//! `einsum` (TensorFlow's `Einsum`, as Keras's `MultiHeadAttention` and `EinsumDense`
//! write it): one or two operands, labels that are letters, `...` for broadcast dims, and
//! an explicit or implicit output. Two operands run as one batched matmul: each is summed
//! over the labels only it has and the output lacks, permuted to `[batch.., free..,
//! contracted..]` (the second to `[batch.., contracted.., free..]`), reshaped to a matrix
//! per batch, multiplied (the batch dims broadcast), and permuted to the output's order.

use super::Tensor;
use crate::error::{Error, Result};
use crate::ops::ReduceOp;

/// A label: a letter's byte, or `ELLIPSIS + i` for the `i`-th broadcast dim of `...`
/// (counted from the left of the widest `...`).
type Label = u16;

/// Where `...`'s dims are numbered from (above every letter).
const ELLIPSIS: Label = 256;

/// A parsed equation: each operand's labels, and the output's.
struct Equation {
    inputs: Vec<Vec<Label>>,
    output: Vec<Label>,
}

/// The labels of one term (`ab...c`), its `...` standing for `ellipsis_dims` dims of the
/// `widest` the equation has (right-aligned, as NumPy aligns broadcast dims).
fn term(text: &str, ellipsis_dims: usize, widest: usize, equation: &str) -> Result<Vec<Label>> {
    let mut labels = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("...") {
            labels.extend((widest - ellipsis_dims..widest).map(|i| ELLIPSIS + i as Label));
            rest = after;
            continue;
        }
        let c = rest.chars().next().unwrap_or(' ');
        if !c.is_ascii_alphabetic() {
            return Err(Error::invalid(format!(
                "Invalid character '{c}' in equation: {equation}"
            )));
        }
        labels.push(c as Label);
        rest = &rest[1..];
    }
    Ok(labels)
}

impl Equation {
    /// Parse `equation` for operands of `ranks`.
    fn parse(equation: &str, ranks: &[usize]) -> Result<Equation> {
        let compact: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
        let (lhs, rhs) = match compact.split_once("->") {
            Some((lhs, rhs)) => (lhs, Some(rhs)),
            None => (compact.as_str(), None),
        };
        let terms: Vec<&str> = lhs.split(',').collect();
        if terms.len() != ranks.len() || !(1..=2).contains(&ranks.len()) {
            return Err(Error::invalid(format!(
                "Expecting {} inputs for equation '{equation}', got {} (Einsum takes one or two)",
                terms.len(),
                ranks.len()
            )));
        }
        // How many dims each operand's `...` stands for.
        let mut spans = Vec::with_capacity(terms.len());
        for (t, &rank) in terms.iter().zip(ranks) {
            let letters = t.replace("...", "").len();
            let span = match (t.contains("..."), rank.checked_sub(letters)) {
                (true, Some(span)) => span,
                (false, Some(0)) => 0,
                _ => {
                    return Err(Error::invalid(format!(
                        "Input '{t}' of equation '{equation}' has {letters} labels for a tensor \
                         of rank {rank}"
                    )))
                }
            };
            spans.push(span);
        }
        let widest = spans.iter().copied().max().unwrap_or(0);
        let inputs = terms
            .iter()
            .zip(&spans)
            .map(|(t, &span)| term(t, span, widest, equation))
            .collect::<Result<Vec<_>>>()?;
        for labels in &inputs {
            let letters: Vec<Label> = labels.iter().copied().filter(|&l| l < ELLIPSIS).collect();
            if (1..letters.len()).any(|i| letters[..i].contains(&letters[i])) {
                return Err(Error::invalid(format!(
                    "Einsum with a label repeated in one operand (a diagonal) is not supported: \
                     {equation}"
                )));
            }
        }
        let output = match rhs {
            Some(rhs) => term(rhs, widest, widest, equation)?,
            None => {
                // The broadcast dims, then the letters used once, in alphabetical order.
                let all: Vec<Label> = inputs.iter().flatten().copied().collect();
                let mut once: Vec<Label> = all
                    .iter()
                    .copied()
                    .filter(|&l| l < ELLIPSIS && all.iter().filter(|&&m| m == l).count() == 1)
                    .collect();
                once.sort_unstable();
                (0..widest as Label)
                    .map(|i| ELLIPSIS + i)
                    .chain(once)
                    .collect()
            }
        };
        for (i, &l) in output.iter().enumerate() {
            if output[..i].contains(&l) || !inputs.iter().any(|t| t.contains(&l)) {
                return Err(Error::invalid(format!(
                    "Output label {} of equation '{equation}' must appear once in the output \
                     and in an input",
                    shown(l)
                )));
            }
        }
        Ok(Equation { inputs, output })
    }

    /// The size of each label, from `dims` of each operand (a broadcast dim of 1 gives way
    /// to another size): `Err` where two operands disagree.
    fn sizes(&self, dims: &[&[usize]], equation: &str) -> Result<Vec<(Label, usize)>> {
        let mut sizes: Vec<(Label, usize)> = Vec::new();
        for (labels, dims) in self.inputs.iter().zip(dims) {
            for (&l, &d) in labels.iter().zip(dims.iter()) {
                match sizes.iter_mut().find(|(m, _)| *m == l) {
                    None => sizes.push((l, d)),
                    Some((_, known)) if *known == d || d == 1 && l >= ELLIPSIS => {}
                    Some((_, known)) if *known == 1 && l >= ELLIPSIS => *known = d,
                    Some((_, known)) => {
                        return Err(Error::invalid(format!(
                            "Expected dimension {known} at label {} of equation '{equation}', \
                             got {d}",
                            shown(l)
                        )))
                    }
                }
            }
        }
        Ok(sizes)
    }
}

/// A label as the equation writes it.
fn shown(label: Label) -> String {
    if label >= ELLIPSIS {
        "...".into()
    } else {
        char::from(label as u8).to_string()
    }
}

/// The axes of `labels` (of a tensor labelled `of`) in `of`.
fn axes_of(of: &[Label], labels: &[Label]) -> Vec<usize> {
    labels
        .iter()
        .filter_map(|l| of.iter().position(|m| m == l))
        .collect()
}

/// `t` (labelled `labels`) summed over the labels `keep` lacks; the labels left.
fn sum_out(
    t: Tensor,
    labels: &[Label],
    keep: impl Fn(Label) -> bool,
) -> Result<(Tensor, Vec<Label>)> {
    let gone: Vec<isize> = (0..labels.len())
        .filter(|&i| !keep(labels[i]))
        .map(|i| i as isize)
        .collect();
    let left: Vec<Label> = labels.iter().copied().filter(|&l| keep(l)).collect();
    if gone.is_empty() {
        return Ok((t, left));
    }
    Ok((t.reduce(ReduceOp::Sum, &gone, false)?, left))
}

impl Tensor {
    /// The output shape of `equation` over operands of static `dims` (`None`: unknown), for
    /// graph shape inference; `None` where a rank is unknown. Errors as [`einsum`](Self::einsum)'s.
    pub fn einsum_shape(
        equation: &str,
        dims: &[Option<Vec<Option<usize>>>],
    ) -> Result<Option<Vec<Option<usize>>>> {
        let Some(known): Option<Vec<&Vec<Option<usize>>>> =
            dims.iter().map(Option::as_ref).collect()
        else {
            return Ok(None);
        };
        let ranks: Vec<usize> = known.iter().map(|d| d.len()).collect();
        let eq = Equation::parse(equation, &ranks)?;
        let size = |l: Label| -> Option<usize> {
            let mut found = None;
            for (labels, dims) in eq.inputs.iter().zip(&known) {
                if let Some(at) = labels.iter().position(|&m| m == l) {
                    match dims[at] {
                        Some(1) if l >= ELLIPSIS => found = found.or(Some(1)),
                        Some(d) => return Some(d),
                        None => return None,
                    }
                }
            }
            found
        };
        Ok(Some(eq.output.iter().map(|&l| size(l)).collect()))
    }

    /// Einstein summation over one or two operands (TensorFlow's `Einsum`, NumPy's
    /// `einsum`): `"abc,cd->abd"`, with `...` for broadcast dims and the output implicit
    /// where `->` is left out. Two operands run as one batched matmul; a label repeated
    /// within one operand (a diagonal) is an `Err`.
    ///
    /// ```
    /// # use polytensor_core::Tensor;
    /// # let cpu = polytensor_cpu::CpuDevice::shared();
    /// let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3], &cpu)?;
    /// let b = Tensor::from_slice(&[1.0f32, 0.0, 0.0, 1.0, 1.0, 1.0], [3, 2], &cpu)?;
    /// assert_eq!(Tensor::einsum("ij,jk->ik", &[&a, &b])?.to_vec::<f32>()?, [4.0, 5.0, 10.0, 11.0]);
    /// assert_eq!(Tensor::einsum("ij->j", &[&a])?.to_vec::<f32>()?, [5.0, 7.0, 9.0]);
    /// # Ok::<(), polytensor_core::Error>(())
    /// ```
    pub fn einsum(equation: &str, operands: &[&Tensor]) -> Result<Tensor> {
        let ranks: Vec<usize> = operands.iter().map(|t| t.rank()).collect();
        let eq = Equation::parse(equation, &ranks)?;
        let dims: Vec<Vec<usize>> = operands.iter().map(|t| t.dims().to_vec()).collect();
        let dims: Vec<&[usize]> = dims.iter().map(Vec::as_slice).collect();
        let sizes = eq.sizes(&dims, equation)?;
        let size = |l: Label| sizes.iter().find(|(m, _)| *m == l).map_or(1, |&(_, s)| s);
        let out = &eq.output;
        let (t, labels) = match operands {
            [a] => sum_out((*a).clone(), &eq.inputs[0], |l| out.contains(&l))?,
            [a, b] => {
                let (la, lb) = (&eq.inputs[0], &eq.inputs[1]);
                // Labels only one operand has and the output lacks are summed first.
                let (a, la) = sum_out((*a).clone(), la, |l| out.contains(&l) || lb.contains(&l))?;
                let (b, lb) = sum_out((*b).clone(), lb, |l| out.contains(&l) || la.contains(&l))?;
                let batch: Vec<Label> = out
                    .iter()
                    .copied()
                    .filter(|l| la.contains(l) && lb.contains(l))
                    .collect();
                let contracted: Vec<Label> = la
                    .iter()
                    .copied()
                    .filter(|l| lb.contains(l) && !out.contains(l))
                    .collect();
                let free_a: Vec<Label> = la.iter().copied().filter(|l| !lb.contains(l)).collect();
                let free_b: Vec<Label> = lb.iter().copied().filter(|l| !la.contains(l)).collect();
                if contracted
                    .iter()
                    .any(|&l| a.dims()[axes_of(&la, &[l])[0]] != b.dims()[axes_of(&lb, &[l])[0]])
                {
                    return Err(Error::invalid(format!(
                        "Einsum '{equation}' contracts a broadcast dim of size 1 with a larger \
                         one; not supported"
                    )));
                }
                let product = |ls: &[Label]| ls.iter().map(|&l| size(l)).product::<usize>();
                let matrix = |t: &Tensor, ls: &[Label], order: &[&[Label]], rows: usize, cols| {
                    let order: Vec<Label> = order.concat();
                    let moved = t.permute(&axes_of(ls, &order))?;
                    let mut shape: Vec<usize> = moved.dims()[..batch.len()].to_vec();
                    shape.extend([rows, cols]);
                    moved.reshape(shape)
                };
                let (m, k, n) = (product(&free_a), product(&contracted), product(&free_b));
                let a = matrix(&a, &la, &[&batch, &free_a, &contracted], m, k)?;
                let b = matrix(&b, &lb, &[&batch, &contracted, &free_b], k, n)?;
                let product = a.matmul(&b)?;
                let mut shape: Vec<usize> = product.dims()[..batch.len()].to_vec();
                shape.extend(free_a.iter().chain(&free_b).map(|&l| size(l)));
                let labels: Vec<Label> = [batch, free_a, free_b].concat();
                (product.reshape(shape)?, labels)
            }
            _ => unreachable!("the equation has one or two operands"),
        };
        t.permute(&axes_of(&labels, out))
    }
}
