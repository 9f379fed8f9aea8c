//! `PT_AddGradients`: TensorFlow's `TF_AddGradients`, the symbolic gradients of a graph's
//! outputs added to it ([`polytensor::graph::Graph::gradients`]).

use std::ffi::c_int;
use std::ptr::null_mut;

use polytensor::graph::Output;
use polytensor::Error;

use super::{locked, output_of, PT_Graph, PT_Output};
use crate::status::{arg, array, guard, PT_Status};

/// The graph outputs of `n` `PT_Output`s at `outputs`, of graph `graph`.
///
/// # Safety
///
/// `outputs` points to `n` readable `PT_Output`s whose operations are live (or is NULL
/// with `n` 0).
unsafe fn outputs_of(
    state: &super::GraphState,
    outputs: *const PT_Output,
    n: c_int,
    what: &str,
) -> Result<Vec<Output>, Error> {
    // SAFETY: the caller's contract.
    let given = unsafe { array(outputs, n, what) }?;
    given
        .iter()
        .map(|output| {
            // SAFETY: the caller's contract: live operations.
            let (op, index) = unsafe { output_of(output, state.id) }?;
            state.graph.output(&op, index)
        })
        .collect()
}

/// TensorFlow's `TF_AddGradients`: add to `graph` the gradients of the sum of the `ny`
/// outputs `y` with respect to each of the `nx` outputs `x`, weighted by the `ny` outputs
/// `dx` (NULL: ones), under the name scope `gradients`, with TensorFlow's op types; write
/// them to the `nx` entries of `dy`. An `x` the `y` do not depend on gets `{NULL, 0}`. On
/// error (an op with no gradient between them, say) `dy` is left as it was; what was
/// added stays in the graph, as TensorFlow's.
///
/// # Safety
///
/// `graph` is a live graph; `y`, `x` point to `ny`, `nx` readable outputs of it, `dx` is
/// NULL or points to `ny`; `dy` points to `nx` writable outputs; `status` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_AddGradients(
    graph: *mut PT_Graph,
    y: *const PT_Output,
    ny: c_int,
    x: *const PT_Output,
    nx: c_int,
    dx: *const PT_Output,
    status: *mut PT_Status,
    dy: *mut PT_Output,
) {
    guard(status, (), || {
        // SAFETY: the caller's contract.
        let graph = unsafe { arg(graph as *const PT_Graph, "graph") }?;
        let mut state = locked(&graph.state);
        // SAFETY: the caller's contract.
        let ys = unsafe { outputs_of(&state, y, ny, "y") }?;
        // SAFETY: the caller's contract.
        let xs = unsafe { outputs_of(&state, x, nx, "x") }?;
        let weights = if dx.is_null() {
            None
        } else {
            // SAFETY: the caller's contract: `ny` readable outputs.
            Some(unsafe { outputs_of(&state, dx, ny, "dx") }?)
        };
        if dy.is_null() && !xs.is_empty() {
            return Err(Error::invalid("dy is NULL"));
        }
        let grads = state.graph.gradients(&ys, &xs, weights.as_deref())?;
        let mut handles = Vec::with_capacity(grads.len());
        for grad in grads {
            handles.push(match grad {
                Some(grad) => PT_Output {
                    oper: state.handle(grad.op().clone())?,
                    index: grad.index() as c_int,
                },
                None => PT_Output {
                    oper: null_mut(),
                    index: 0,
                },
            });
        }
        for (i, handle) in handles.into_iter().enumerate() {
            // SAFETY: the caller's contract: `nx` writable outputs at `dy`.
            unsafe { dy.add(i).write(handle) };
        }
        Ok(())
    })
}
