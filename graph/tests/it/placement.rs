//! Placement on several devices: requests in TensorFlow's and polytensor's names, copies
//! where edges cross devices, soft placement and its errors, colocation, device scopes and
//! variables that live on their device. The devices are logical CPU devices (`cpu:0` and
//! new ones, each with its own memory), so these run everywhere; the facade's
//! `tests/placement.rs` runs one graph across cpu:0, opencl:0 and wgpu:0.

use std::sync::Arc;

use polytensor_core::device::same_device;
use polytensor_core::{DataType, Device, PartialTensorShape};
use polytensor_cpu::CpuDevice;
use polytensor_graph::{AttrValue, Graph, ListValue, Output, Session, SessionOptions, Transfer};

/// cpu:0 and a second logical CPU device.
fn two_devices() -> [Arc<dyn Device>; 2] {
    [CpuDevice::shared(), CpuDevice::new() as Arc<dyn Device>]
}

fn session(g: &Graph, devices: &[Arc<dyn Device>], soft: bool) -> Session {
    let mut options = SessionOptions::new(devices.to_vec());
    options.allow_soft_placement = soft;
    Session::with_options(g, options).unwrap()
}

/// A scalar f32 resource variable `name`, asking for `device` (empty for none).
fn scalar_variable(g: &mut Graph, name: &str, device: &str) -> Output {
    g.op("VarHandleOp")
        .name(name)
        .attr("dtype", DataType::Float)
        .attr("shape", &PartialTensorShape::new(&[]).unwrap())
        .attr("shared_name", name)
        .device(device)
        .build_output()
        .unwrap()
}

/// `ReadVariableOp` of `v`, asking for `device` (empty for none).
fn read_variable(g: &mut Graph, v: &Output, device: &str) -> Output {
    g.op("ReadVariableOp")
        .input(v)
        .attr("dtype", DataType::Float)
        .device(device)
        .build_output()
        .unwrap()
}

#[test]
fn operations_run_where_they_ask_and_tensors_cross_between() {
    let [cpu0, other] = two_devices();
    let mut g = Graph::new();
    let a = g.constant_values(&[1.0f32, 2.0], &[2]).unwrap();
    // `/device:CPU:1` is the session's second CPU device.
    let b = g.device_scope("/job:localhost/replica:0/task:0/device:CPU:1", |g| {
        g.constant_named("b", &[10.0f32, 20.0], &[2]).unwrap()
    });
    let sum = g
        .op("AddV2")
        .name("sum")
        .inputs(&[a.clone(), b])
        .device("/device:CPU:1")
        .build_output()
        .unwrap();
    let product = g.mul(&sum, &a).unwrap();
    // Folded, this graph of constants would run no kernel and copy nothing.
    let mut options = SessionOptions::new(vec![cpu0.clone(), other.clone()]);
    options.allow_soft_placement = false;
    options.optimizations.constant_folding = false;
    let s = Session::with_options(&g, options).unwrap();
    let values = s.run(&[], &[&sum, &product], &[]).unwrap();
    assert_eq!(values[0].to_vec::<f32>().unwrap(), [11.0, 22.0]);
    assert_eq!(values[1].to_vec::<f32>().unwrap(), [11.0, 44.0]);
    // Each value comes back on the device that made it.
    assert!(same_device(values[0].device(), &other));
    assert!(same_device(values[1].device(), &cpu0));
    let placement = s.placement().unwrap();
    let device_of = |name: &str| placement.device_of(name).unwrap().to_string();
    assert_eq!(device_of("Const"), "cpu:0");
    assert_eq!(device_of("b"), other.name());
    assert_eq!(device_of("sum"), other.name());
    assert_eq!(device_of("mul"), "cpu:0");
    // `Const:0` goes to the other device once, `sum:0` comes back once.
    assert_eq!(
        placement.copies,
        [
            Transfer {
                tensor: "Const:0".into(),
                from: "cpu:0".into(),
                to: other.name().into()
            },
            Transfer {
                tensor: "sum:0".into(),
                from: other.name().into(),
                to: "cpu:0".into()
            },
        ]
    );
    let listing = placement.to_string();
    assert!(listing.contains("sum: (AddV2): cpu:"), "{listing}");
    assert!(listing.contains("sum:0: copied"), "{listing}");
}

#[test]
fn soft_placement_falls_back_and_strict_placement_says_why() {
    let [cpu0, _] = two_devices();
    let mut g = Graph::new();
    let a = g.constant(3.0f32).unwrap();
    let b = g.constant(4.0f32).unwrap();
    let total = g
        .op("AddV2")
        .name("total")
        .inputs(&[a, b])
        .device("/device:GPU:0")
        .build_output()
        .unwrap();
    // Soft (the default): no GPU in this session, so the default device.
    let soft = Session::new(&g, cpu0.clone());
    assert_eq!(
        soft.run(&[], &[&total], &[]).unwrap()[0]
            .item::<f32>()
            .unwrap(),
        7.0
    );
    assert_eq!(soft.placement().unwrap().ops[2].device, "cpu:0");
    // Strict: TensorFlow's error, naming the op and the devices there are.
    let strict = session(&g, &[cpu0], false);
    let error = strict.run(&[], &[&total], &[]).unwrap_err().to_string();
    assert!(
        error.contains("Cannot assign a device for operation total")
            && error.contains("was explicitly assigned to /device:GPU:0")
            && error.contains("available devices are [ cpu:0 ]"),
        "{error}"
    );
}

#[test]
fn malformed_requests_and_missing_colocations_are_errors() {
    let mut g = Graph::new();
    g.op("NoOp")
        .name("bad")
        .device("/device:GPU:x")
        .build()
        .unwrap();
    let s = Session::new(&g, CpuDevice::shared());
    let error = s.placement().unwrap_err().to_string();
    assert!(
        error.contains("Malformed device specification '/device:GPU:x' in node bad"),
        "{error}"
    );
    let mut g = Graph::new();
    let classes = ListValue {
        s: vec![b"loc:@nowhere".to_vec()],
        ..Default::default()
    };
    g.op("NoOp")
        .name("lonely")
        .attr("_class", AttrValue::from(classes))
        .build()
        .unwrap();
    let placement = Session::new(&g, CpuDevice::shared()).placement().unwrap();
    assert_eq!(placement.ops[0].device, "cpu:0");
    // An imported GraphDef is refused, as TensorFlow's importer refuses it.
    let error = Graph::from_graph_def(&g.to_graph_def())
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("Node 'lonely' expects to be colocated with unknown node 'nowhere'"),
        "{error}"
    );
}

#[test]
fn a_colocation_group_pinned_to_two_devices_needs_soft_placement() {
    let devices = two_devices();
    let mut g = Graph::new();
    let a = g
        .op("Const")
        .name("a")
        .attr("dtype", DataType::Float)
        .attr(
            "value",
            polytensor_core::Tensor::scalar(1.0f32, &devices[0])
                .unwrap()
                .to_proto()
                .unwrap(),
        )
        .device("/device:CPU:0")
        .build_output()
        .unwrap();
    let classes = ListValue {
        s: vec![b"loc:@a".to_vec()],
        ..Default::default()
    };
    let b = g
        .op("Identity")
        .name("b")
        .input(&a)
        .attr("_class", AttrValue::from(classes))
        .device("/device:CPU:1")
        .build_output()
        .unwrap();
    let error = session(&g, &devices, false)
        .run(&[], &[&b], &[])
        .unwrap_err()
        .to_string();
    assert!(
        error.contains(
            "Cannot colocate nodes {{colocation_node a}} and {{colocation_node b}}: Cannot \
             merge devices with incompatible ids: '/device:CPU:0' and '/device:CPU:1'"
        ),
        "{error}"
    );
    // With soft placement the group runs on one device.
    let value = session(&g, &devices, true).run(&[], &[&b], &[]).unwrap();
    assert_eq!(value[0].item::<f32>().unwrap(), 1.0);
}

#[test]
fn colocation_scopes_and_variables_follow_their_group() {
    let [cpu0, other] = two_devices();
    let mut g = Graph::new();
    // A device scope, as `with tf.device(...)`: ops inside ask for it, unless they name
    // their own device.
    let (x, y) = g.device_scope("/device:CPU:1", |g| {
        let x = g.constant(2.0f32).unwrap();
        let five = g.constant_named("five", &[5.0f32], &[]).unwrap();
        let y = g
            .op("Identity")
            .name("y")
            .input(&five)
            .device("/device:CPU:0")
            .build_output()
            .unwrap();
        (x, y)
    });
    // `_class: loc:@Const` puts `follower` with `Const`, on the other device.
    let classes = ListValue {
        s: vec![b"loc:@Const".to_vec()],
        ..Default::default()
    };
    let follower = g
        .op("Identity")
        .name("follower")
        .input(&y)
        .attr("_class", AttrValue::from(classes))
        .build_output()
        .unwrap();
    // A resource variable asked for on the other device: its assignment and reads go
    // with it, whatever they ask for.
    let v = scalar_variable(&mut g, "v", "/device:CPU:1");
    let assign = g
        .op("AssignVariableOp")
        .inputs(&[v.clone(), x])
        .build()
        .unwrap();
    let read = read_variable(&mut g, &v, "/device:CPU:0");
    let doubled = g.add(&read, &follower).unwrap();
    let s = session(&g, &[cpu0.clone(), other.clone()], false);
    s.run(&[], &[], &[&assign]).unwrap();
    let values = s.run(&[], &[&read, &doubled], &[]).unwrap();
    assert_eq!(values[0].item::<f32>().unwrap(), 2.0);
    assert_eq!(values[1].item::<f32>().unwrap(), 7.0);
    assert!(same_device(values[0].device(), &other));
    assert!(same_device(values[1].device(), &cpu0));
    let placement = s.placement().unwrap();
    let device_of = |name: &str| placement.device_of(name).unwrap().to_string();
    for name in [
        "Const",
        "five",
        "follower",
        "v",
        "AssignVariableOp",
        "ReadVariableOp",
    ] {
        assert_eq!(device_of(name), other.name(), "{name}");
    }
    assert_eq!(device_of("y"), "cpu:0");
    assert_eq!(device_of("add"), "cpu:0");
}

#[test]
fn one_session_runs_from_several_threads_at_once() {
    // `run` takes `&self`: threads share a session, and each variable update is whole.
    let mut g = Graph::new();
    let v = scalar_variable(&mut g, "counter", "");
    let zero = g.constant(0.0f32).unwrap();
    let init = g
        .op("AssignVariableOp")
        .inputs(&[v.clone(), zero])
        .build()
        .unwrap();
    let one = g.constant(1.0f32).unwrap();
    let bump = g
        .op("AssignAddVariableOp")
        .inputs(&[v.clone(), one])
        .build()
        .unwrap();
    let read = read_variable(&mut g, &v, "");
    let session = Session::new(&g, CpuDevice::shared());
    session.run(&[], &[], &[&init]).unwrap();
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                for _ in 0..50 {
                    session.run(&[], &[], &[&bump]).unwrap();
                }
            });
        }
    });
    let total = session.run(&[], &[&read], &[]).unwrap();
    assert_eq!(total[0].item::<f32>().unwrap(), 200.0);
}
