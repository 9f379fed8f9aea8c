//! Kernel arguments and enqueues on one command queue.

use std::ptr;
use std::sync::Mutex;

use opencl3::command_queue::CommandQueue;
use opencl3::error_codes::ClError;
use opencl3::kernel::Kernel;
use opencl3::types::cl_mem;
use polytensor_gpu_kit::launch::Arg;

/// Set `args` on `kernel` and enqueue it over `global` work-items in groups of `local`,
/// holding the kernel's lock across both.
pub(crate) fn enqueue(
    queue: &CommandQueue,
    kernel: &Mutex<Kernel>,
    args: &[Arg<cl_mem>],
    global: &[usize; 3],
    local: &[usize; 3],
) -> Result<(), ClError> {
    let kernel = kernel.lock().unwrap_or_else(|e| e.into_inner());
    for (index, arg) in args.iter().enumerate() {
        // SAFETY: each argument has the size and type of the kernel parameter at its index
        // (`GLOBAL T*` parameters take a `cl_mem`, `i64` ones an `i64`), as the generator
        // documents each kernel's parameter list.
        unsafe {
            match arg {
                Arg::Mem(mem) => kernel.set_arg(index as u32, mem)?,
                Arg::I64(value) => kernel.set_arg(index as u32, value)?,
            }
        }
    }
    // One-dimensional launches are enqueued as such: PoCL's work-group loops then have one
    // level.
    let dims = if global[1..] == [1, 1] && local[1..] == [1, 1] {
        1
    } else {
        3
    };
    // SAFETY: every argument is set; `global` and `local` hold three sizes each, of which
    // the first `dims` are passed; the buffers stay alive until the command completes
    // (OpenCL retains them).
    let event = unsafe {
        queue.enqueue_nd_range_kernel(
            kernel.get(),
            dims,
            ptr::null(),
            global.as_ptr(),
            local.as_ptr(),
            &[],
        )?
    };
    // The event is not waited on: the queue is in order, and `finish` waits for all.
    drop(event);
    Ok(())
}
