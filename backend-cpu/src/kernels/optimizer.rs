//! `Device::apply_update`: an optimizer's update in one pass, each element's new variable
//! and slots by [`Rule::step`] on numbers (rounded as the elementwise ops round), pieces
//! split across threads. Float32 and float64; other dtypes run as elementwise ops.

use polytensor_core::train::{Arithmetic, Rule};

use polytensor_core::{DataType, Element, OutView, Result, TensorView};

use crate::strided::{contiguous_input, output, run_items, SharedOut, PARALLEL_MIN_ELEMENTS};

/// [`Device::apply_update`](polytensor_core::Device::apply_update) on the CPU.
pub(crate) fn apply_update(
    rule: Rule,
    var: &TensorView<'_>,
    slots: &[TensorView<'_>],
    scalars: &[TensorView<'_>],
    grad: &TensorView<'_>,
    outs: &mut [OutView<'_>],
) -> Result<bool> {
    match var.dtype() {
        DataType::Float => update::<f32>(rule, var, slots, scalars, grad, outs),
        DataType::Double => update::<f64>(rule, var, slots, scalars, grad, outs),
        _ => Ok(false),
    }
}

/// Elements per block of the update loop.
const BLOCK: usize = 64;

/// [`steps`] with `rule` a constant in each arm: each rule's loop is compiled on its own,
/// the step inlined with its branches on the rule folded, so the block vectorises.
#[inline(always)]
fn each_rule<T: Arithmetic + Copy>(
    rule: Rule,
    prepared: &[T; 6],
    operands: [&[T]; 4],
    block: &mut [[T; BLOCK]; 3],
) -> Result<()> {
    match rule {
        Rule::GradientDescent => steps(Rule::GradientDescent, prepared, operands, block),
        Rule::Momentum { nesterov: false } => steps(
            Rule::Momentum { nesterov: false },
            prepared,
            operands,
            block,
        ),
        Rule::Momentum { nesterov: true } => {
            steps(Rule::Momentum { nesterov: true }, prepared, operands, block)
        }
        Rule::KerasMomentum { nesterov: false } => steps(
            Rule::KerasMomentum { nesterov: false },
            prepared,
            operands,
            block,
        ),
        Rule::KerasMomentum { nesterov: true } => steps(
            Rule::KerasMomentum { nesterov: true },
            prepared,
            operands,
            block,
        ),
        Rule::Adam { nesterov: false } => {
            steps(Rule::Adam { nesterov: false }, prepared, operands, block)
        }
        Rule::Adam { nesterov: true } => {
            steps(Rule::Adam { nesterov: true }, prepared, operands, block)
        }
        Rule::Adagrad {
            update_slots: false,
        } => steps(
            Rule::Adagrad {
                update_slots: false,
            },
            prepared,
            operands,
            block,
        ),
        Rule::Adagrad { update_slots: true } => steps(
            Rule::Adagrad { update_slots: true },
            prepared,
            operands,
            block,
        ),
        Rule::AdagradV2 {
            update_slots: false,
        } => steps(
            Rule::AdagradV2 {
                update_slots: false,
            },
            prepared,
            operands,
            block,
        ),
        Rule::AdagradV2 { update_slots: true } => steps(
            Rule::AdagradV2 { update_slots: true },
            prepared,
            operands,
            block,
        ),
        Rule::RmsProp => steps(Rule::RmsProp, prepared, operands, block),
    }
}

/// One block's [`each_rule`], to compile for the widest vectors this CPU has
/// ([`crate::vmath::widest`]; the same operations, so the same bits).
struct Block<'a, T> {
    rule: Rule,
    prepared: &'a [T; 6],
    operands: [&'a [T]; 4],
    block: &'a mut [[T; BLOCK]; 3],
}

impl<T: Arithmetic + Copy> crate::vmath::Vectorised for Block<'_, T> {
    type Output = Result<()>;

    #[inline(always)]
    fn run(self) -> Result<()> {
        each_rule(self.rule, self.prepared, self.operands, self.block)
    }
}

/// `rule`'s step on each element of one block: `[var, grad, slot 0, slot 1]` in, the new
/// variable and slots into `block`.
#[inline(always)]
fn steps<T: Arithmetic + Copy>(
    rule: Rule,
    prepared: &[T; 6],
    [v, g, s0, s1]: [&[T]; 4],
    block: &mut [[T; BLOCK]; 3],
) -> Result<()> {
    let n = v.len().min(g.len()).min(s0.len()).min(s1.len()).min(BLOCK);
    for i in 0..n {
        let (value, [a, b]) = rule.step(prepared, &v[i], &[s0[i], s1[i]], &g[i])?;
        block[0][i] = value;
        block[1][i] = a;
        block[2][i] = b;
    }
    Ok(())
}

fn update<T: Element + Arithmetic + Copy + Send + Sync>(
    rule: Rule,
    var: &TensorView<'_>,
    slots: &[TensorView<'_>],
    scalars: &[TensorView<'_>],
    grad: &TensorView<'_>,
    outs: &mut [OutView<'_>],
) -> Result<bool> {
    let (Some(var), Some(grad)) = (contiguous_input::<T>(var)?, contiguous_input::<T>(grad)?)
    else {
        return Ok(false);
    };
    let mut kept: [&[T]; 2] = [var, var];
    for (slot, view) in kept.iter_mut().zip(slots) {
        match contiguous_input::<T>(view)? {
            Some(values) => *slot = values,
            None => return Ok(false),
        }
    }
    let mut numbers = [T::from_scalar(polytensor_core::Scalar::F64(0.0)); 6];
    for (number, view) in numbers.iter_mut().zip(scalars) {
        match contiguous_input::<T>(view)?.and_then(|values| values.first()) {
            Some(&value) => *number = value,
            None => return Ok(false),
        }
    }
    let prepared = rule.prepare(&numbers[0], &numbers)?;
    let written: Vec<SharedOut<T>> = outs
        .iter_mut()
        .map(|out| output::<T>(out).map(|o| SharedOut::new(o)))
        .collect::<Result<_>>()?;
    let total = var.len();
    let threads = rayon::current_num_threads();
    let piece = (total / (threads * 8)).max(4096);
    let parallel = total >= PARALLEL_MIN_ELEMENTS && threads > 1;
    let failure = std::sync::Mutex::new(None);
    run_items(total.div_ceil(piece), parallel, &|item| {
        let start = item * piece;
        let len = piece.min(total - start);
        // SAFETY: each item owns elements `start..start + len` of every output.
        let mut runs: Vec<&mut [T]> = written
            .iter()
            .map(|w| unsafe { w.run(start, len) })
            .collect();
        let inputs = [var, grad, kept[0], kept[1]].map(|s| &s[start..start + len]);
        // Blocks of a few elements into local arrays, then copied out: the loop over a
        // block holds no indirection.
        let mut block = [[numbers[0]; BLOCK]; 3];
        for first in (0..len).step_by(BLOCK) {
            let n = BLOCK.min(len - first);
            let operands = inputs.map(|s| &s[first..first + n]);
            let step = Block {
                rule,
                prepared: &prepared,
                operands,
                block: &mut block,
            };
            if let Err(e) = crate::vmath::widest(step) {
                *failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                return;
            }
            for (run, values) in runs.iter_mut().zip(&block) {
                run[first..first + n].copy_from_slice(&values[..n]);
            }
        }
    });
    match failure.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(e) => Err(e),
        None => Ok(true),
    }
}
