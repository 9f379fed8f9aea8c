//! Convolution and pooling launches (the kit's window kernels, or the queue's library).

use polytensor_core::plan::window::WindowGeometry;
use polytensor_core::{DataType, Device, Epilogue, Error, OutView, Result, TensorView};

use super::{map_grid, operand_at, output_mem, Arg, KitDevice, Launch, Queue};
use crate::table::{self, ProgramKey};
use crate::window;

/// `Device::window_kernels`: the kit has them for floats the device computes in.
pub fn window_kernels<Q: Queue>(q: &KitDevice<Q>, dtype: DataType) -> bool {
    table::window_kernels(dtype, q.fp64()).is_some()
}

/// The memory and element offset of a window operand, checked
/// ([`window::check_operand`]).
fn window_operand<Q: Queue>(
    q: &KitDevice<Q>,
    view: &TensorView<'_>,
    dtype: DataType,
    count: usize,
    what: &str,
) -> Result<(Q::Mem, i64)> {
    window::check_operand(view, dtype, count, what)?;
    operand_at(q, view)
}

/// `Device::conv2d`: the device's library where it takes the convolution (then the
/// kit's `epilogue` kernel), else the kit's `conv2d` or `depthwise2d` kernel with the
/// epilogue fused.
pub fn conv2d<Q: Queue>(
    q: &KitDevice<Q>,
    x: &TensorView<'_>,
    filter: &TensorView<'_>,
    g: &WindowGeometry,
    depthwise: bool,
    epilogue: &Epilogue<'_>,
    out: &mut OutView<'_>,
) -> Result<()> {
    let dtype = x.dtype();
    let unsupported = || q.unsupported("conv2d", dtype);
    if !window_kernels(q, dtype) {
        return Err(unsupported());
    }
    let out_channels = g.conv_channels(depthwise)?;
    let outputs = g.output_elements(out_channels)?;
    let x_at = window_operand(q, x, dtype, g.input_elements()?, "input")?;
    let f_at = window_operand(q, filter, dtype, g.filter_elements()?, "filter")?;
    window::check_operand(&out.view(), dtype, outputs, "output")?;
    let target = output_mem(q, out)?;
    // The epilogue's parts: each present one checked, absent ones pointing at the input
    // (never read).
    let part = |view: &Option<TensorView<'_>>, what| match view {
        Some(v) => window_operand(q, v, dtype, out_channels, what),
        None => Ok(x_at),
    };
    let (scale, shift) = (
        part(&epilogue.scale, "scale")?,
        part(&epilogue.shift, "shift")?,
    );
    if epilogue.residual.is_some() {
        // `Device::conv_residual` is false here: the residual runs as an op after.
        return Err(Error::invalid(
            "a window kernel takes no residual (it is added after the convolution)",
        ));
    }
    let fused = window::Epilogue {
        scale: epilogue.scale.is_some(),
        shift: epilogue.shift.is_some(),
        activation: epilogue.activation,
    };
    let word = fused.word().ok_or_else(|| {
        Error::invalid("a window kernel applies only Relu or Relu6 after a convolution")
    })?;
    if outputs == 0 {
        return Ok(());
    }
    let program = q.program(ProgramKey::Window(dtype))?;
    let out_at = (target, out.layout().offset() as i64);
    if Q::library_conv2d(q, x, filter, g, depthwise, out)? {
        if fused.is_empty() {
            return Ok(());
        }
        let mut args = vec![Arg::I64(outputs as i64), Arg::I64(out_channels as i64)];
        args.extend([
            Arg::Mem(scale.0),
            Arg::I64(scale.1),
            Arg::Mem(shift.0),
            Arg::I64(shift.1),
            Arg::I64(word),
            Arg::Mem(target),
            Arg::I64(out_at.1),
        ]);
        let launch = Launch {
            kernel: "epilogue".into(),
            args: &args,
            grid: map_grid::<Q>(outputs),
        };
        // SAFETY: the epilogue kernel's parameters (`window` documents them): the output's
        // `outputs` contiguous elements and the per-channel parts of `out_channels`
        // elements, all checked against their live buffers above.
        return unsafe { q.launch(&program, launch) };
    }
    let pixels = outputs / out_channels.max(1);
    let (kernel, items) = if depthwise {
        ("depthwise2d", outputs)
    } else {
        ("conv2d", window::conv_items(pixels, g.filters))
    };
    let args = window::conv_args(items, g, x_at, f_at, [scale, shift], word, out_at);
    let launch = Launch {
        kernel: kernel.into(),
        args: &args,
        grid: map_grid::<Q>(items),
    };
    // SAFETY: the convolution kernel's parameters (`window` documents them) over the
    // input, filter, epilogue parts and output, each checked above to be a contiguous view
    // of its live buffer with the element count the geometry reads or writes.
    unsafe { q.launch(&program, launch) }
}

/// `Device::conv2d_backprop_input`: the kit's `conv2d_backprop_input` kernel.
pub fn conv2d_backprop_input<Q: Queue>(
    q: &KitDevice<Q>,
    dy: &TensorView<'_>,
    filter: &TensorView<'_>,
    g: &WindowGeometry,
    out: &mut OutView<'_>,
) -> Result<()> {
    let dtype = dy.dtype();
    if !window_kernels(q, dtype) {
        return Err(q.unsupported("conv2d_backprop_input", dtype));
    }
    let outputs = g.input_elements()?;
    let dy_at = window_operand(q, dy, dtype, g.output_elements(g.filters)?, "gradient")?;
    let f_at = window_operand(q, filter, dtype, g.filter_elements()?, "filter")?;
    window::check_operand(&out.view(), dtype, outputs, "output")?;
    let target = output_mem(q, out)?;
    if outputs == 0 {
        return Ok(());
    }
    let program = q.program(ProgramKey::Window(dtype))?;
    let out_at = (target, out.layout().offset() as i64);
    // No epilogue: its parts point at the gradient (never read).
    let args = window::conv_args(outputs, g, dy_at, f_at, [dy_at, dy_at], 0, out_at);
    let launch = Launch {
        kernel: "conv2d_backprop_input".into(),
        args: &args,
        grid: map_grid::<Q>(outputs),
    };
    // SAFETY: the kernel's parameters (`window` documents them) over the gradient, filter
    // and image, each checked above to be a contiguous view of its live buffer with the
    // element count the geometry reads or writes.
    unsafe { q.launch(&program, launch) }
}

/// `Device::pool2d`: the kit's `max_pool2d` or `avg_pool2d` kernel.
pub fn pool2d<Q: Queue>(
    q: &KitDevice<Q>,
    x: &TensorView<'_>,
    g: &WindowGeometry,
    max: bool,
    out: &mut OutView<'_>,
) -> Result<()> {
    let dtype = x.dtype();
    if !window_kernels(q, dtype) {
        return Err(q.unsupported("pool2d", dtype));
    }
    let outputs = g.output_elements(g.channels)?;
    let x_at = window_operand(q, x, dtype, g.input_elements()?, "input")?;
    window::check_operand(&out.view(), dtype, outputs, "output")?;
    let target = output_mem(q, out)?;
    if outputs == 0 {
        return Ok(());
    }
    let program = q.program(ProgramKey::Window(dtype))?;
    let out_at = (target, out.layout().offset() as i64);
    let args = window::pool_args(outputs, g, x_at, out_at);
    let launch = Launch {
        kernel: if max { "max_pool2d" } else { "avg_pool2d" }.into(),
        args: &args,
        grid: map_grid::<Q>(outputs),
    };
    // SAFETY: the pooling kernel's parameters (`window` documents them) over the input and
    // output, each checked above to be a contiguous view of its live buffer with the
    // element count the geometry reads or writes.
    unsafe { q.launch(&program, launch) }
}
