//! Shorthands for the common operations, writing the attributes TensorFlow's Python writes,
//! and named as TensorFlow's Python names them (`a + b` is `add`, `tf.matmul` is `MatMul`).

use polytensor_core::element::as_bytes;
use polytensor_core::proto::make_tensor_proto_from_bytes;
use polytensor_core::{DataType, Element, PartialTensorShape, Result, Tensor, TensorShape};

use crate::attr::int_list;
use crate::graph::{Graph, Operation, Output};

/// A resource variable as [`Graph::resource_variable`] adds it.
#[derive(Clone, Debug)]
pub struct Variable {
    /// The `VarHandleOp`'s handle: what [`Graph::gradients`] and [`Graph::minimize`] take.
    pub handle: Output,
    /// The `AssignVariableOp` that sets it to its initial value.
    pub initializer: Operation,
    /// A `ReadVariableOp` of it: its value where the model uses it.
    pub value: Output,
}

impl Graph {
    /// `tf.constant(value)`: a scalar `Const`.
    pub fn constant<T: Element>(&mut self, value: T) -> Result<Output> {
        self.constant_values(&[value], &[])
    }

    /// `tf.constant(values, shape=dims)`: a `Const` holding host elements (row-major; fewer
    /// values than elements repeat the last one, as TensorFlow does).
    pub fn constant_values<T: Element>(&mut self, values: &[T], dims: &[usize]) -> Result<Output> {
        self.constant_named("Const", values, dims)
    }

    /// `tf.constant(values, shape=dims, name=name)`: [`Graph::constant_values`] named `name`
    /// (made unique in the current scope, as TensorFlow does).
    pub fn constant_named<T: Element>(
        &mut self,
        name: &str,
        values: &[T],
        dims: &[usize],
    ) -> Result<Output> {
        let shape = TensorShape::new(dims)?;
        let proto = make_tensor_proto_from_bytes(T::DTYPE, as_bytes(values), &shape)?;
        self.op("Const")
            .name(name)
            .attr("dtype", T::DTYPE)
            .attr("value", proto)
            .build_output()
    }

    /// A `Const` holding a tensor's values (from any device).
    pub fn constant_tensor(&mut self, value: &Tensor) -> Result<Output> {
        self.op("Const")
            .attr("dtype", value.dtype())
            .attr("value", value.to_proto()?)
            .build_output()
    }

    /// `tf.compat.v1.placeholder(dtype, shape)`.
    pub fn placeholder(&mut self, dtype: DataType, shape: &PartialTensorShape) -> Result<Output> {
        self.placeholder_named("Placeholder", dtype, shape)
    }

    /// `tf.compat.v1.placeholder(dtype, shape, name=name)` (the name made unique in the
    /// current scope): fed as `name:0`.
    pub fn placeholder_named(
        &mut self,
        name: &str,
        dtype: DataType,
        shape: &PartialTensorShape,
    ) -> Result<Output> {
        self.op("Placeholder")
            .name(name)
            .attr("dtype", dtype)
            .attr("shape", shape)
            .build_output()
    }

    /// An elementwise op of two operands (`AddV2`, `Mul`, `Less`, ...), named `name`.
    pub fn binary(&mut self, op_type: &str, name: &str, a: &Output, b: &Output) -> Result<Output> {
        self.op(op_type)
            .name(name)
            .input(a)
            .input(b)
            .attr("T", a.dtype())
            .build_output()
    }

    /// An elementwise op of one operand (`Relu`, `Exp`, ...), named by its type.
    pub fn unary(&mut self, op_type: &str, x: &Output) -> Result<Output> {
        self.op(op_type)
            .input(x)
            .attr("T", x.dtype())
            .build_output()
    }

    /// `a + b` (`AddV2`, named `add`).
    pub fn add(&mut self, a: &Output, b: &Output) -> Result<Output> {
        self.binary("AddV2", "add", a, b)
    }

    /// `a - b` (`Sub`, named `sub`).
    pub fn sub(&mut self, a: &Output, b: &Output) -> Result<Output> {
        self.binary("Sub", "sub", a, b)
    }

    /// `a * b` (`Mul`, named `mul`).
    pub fn mul(&mut self, a: &Output, b: &Output) -> Result<Output> {
        self.binary("Mul", "mul", a, b)
    }

    /// `tf.Variable(initial, name=name)` as TensorFlow 2 makes it: a `VarHandleOp` named
    /// `name` (its `shared_name`) of `initial`'s dtype and static shape, the
    /// `AssignVariableOp` that initialises it, and a `ReadVariableOp` of it.
    pub fn resource_variable(&mut self, name: &str, initial: &Output) -> Result<Variable> {
        let handle = self
            .op("VarHandleOp")
            .name(name)
            .attr("dtype", initial.dtype())
            .attr("shape", initial.shape())
            .attr("shared_name", name)
            .build_output()?;
        let initializer = self
            .op("AssignVariableOp")
            .input(&handle)
            .input(initial)
            .attr("dtype", initial.dtype())
            .build()?;
        let value = self
            .op("ReadVariableOp")
            .input(&handle)
            .attr("dtype", initial.dtype())
            .build_output()?;
        Ok(Variable {
            handle,
            initializer,
            value,
        })
    }

    /// `tf.nn.conv2d(x, filter, strides, padding)` of NHWC images (`padding` `"SAME"` or
    /// `"VALID"`).
    pub fn conv2d(
        &mut self,
        x: &Output,
        filter: &Output,
        [sh, sw]: [usize; 2],
        padding: &str,
    ) -> Result<Output> {
        self.op("Conv2D")
            .input(x)
            .input(filter)
            .attr("strides", int_list(&[1, sh as i64, sw as i64, 1]))
            .attr("padding", padding)
            .build_output()
    }

    /// `tf.nn.max_pool2d(x, window, strides, padding)` of NHWC images.
    pub fn max_pool(
        &mut self,
        x: &Output,
        [kh, kw]: [usize; 2],
        [sh, sw]: [usize; 2],
        padding: &str,
    ) -> Result<Output> {
        self.op("MaxPool")
            .input(x)
            .attr("ksize", int_list(&[1, kh as i64, kw as i64, 1]))
            .attr("strides", int_list(&[1, sh as i64, sw as i64, 1]))
            .attr("padding", padding)
            .build_output()
    }

    /// `tf.nn.bias_add(x, bias)` (NHWC: the bias per last dim).
    pub fn bias_add(&mut self, x: &Output, bias: &Output) -> Result<Output> {
        self.op("BiasAdd").input(x).input(bias).build_output()
    }

    /// `tf.matmul(a, b)` (`MatMul`).
    pub fn matmul(&mut self, a: &Output, b: &Output) -> Result<Output> {
        self.op("MatMul")
            .input(a)
            .input(b)
            .attr("transpose_a", false)
            .attr("transpose_b", false)
            .build_output()
    }
}
