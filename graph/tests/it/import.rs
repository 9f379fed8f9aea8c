//! `Graph::import_graph_def` as `tf.graph_util.import_graph_def`: a name prefix made
//! unique, an input map, return elements, colocations renamed with the nodes, and errors
//! that leave the graph as it was.

use polytensor_core::{DataType, PartialTensorShape, Tensor};
use polytensor_cpu::CpuDevice;
use polytensor_graph::{AttrValue, Graph, ImportOptions, Imported, ListValue, Output, Session};

/// `y = x * 2 + 1` over a placeholder `x`, with `init` a NoOp and `y` colocated with `x`.
fn model() -> Graph {
    let mut g = Graph::new();
    let shape = PartialTensorShape::new(&[Some(2)]).unwrap();
    let x = g.placeholder_named("x", DataType::Float, &shape).unwrap();
    let two = g.constant_named("two", &[2.0f32], &[]).unwrap();
    let one = g.constant_named("one", &[1.0f32], &[]).unwrap();
    let scaled = g.mul(&x, &two).unwrap();
    let classes = ListValue {
        s: vec![b"loc:@x".to_vec()],
        ..Default::default()
    };
    g.op("AddV2")
        .name("y")
        .inputs(&[scaled, one])
        .attr("_class", AttrValue::from(classes))
        .build()
        .unwrap();
    g.op("NoOp").name("init").build().unwrap();
    g
}

fn output(imported: &Imported) -> Output {
    match imported {
        Imported::Output(o) => o.clone(),
        Imported::Operation(op) => panic!("{} is an operation", op.name()),
    }
}

#[test]
fn imports_go_under_a_unique_prefix_with_inputs_mapped() {
    let def = model().to_graph_def();
    let mut g = Graph::new();
    let feed = g.constant_named("feed", &[3.0f32, -1.0], &[2]).unwrap();
    let options = ImportOptions {
        prefix: "import".into(),
        input_map: vec![("x:0".into(), feed)],
        return_elements: vec!["y:0".into(), "init".into()],
    };
    let first = g.import_graph_def(&def, &options).unwrap();
    let y = output(&first[0]);
    assert_eq!(y.name(), "import/y:0");
    assert!(matches!(&first[1], Imported::Operation(op) if op.name() == "import/init"));
    // Importing again takes the next free prefix, as a name scope does.
    let second = g
        .import_graph_def(
            &def,
            &ImportOptions {
                return_elements: vec!["y:0".into()],
                ..ImportOptions::with_prefix("import")
            },
        )
        .unwrap();
    assert_eq!(output(&second[0]).name(), "import_1/y:0");
    // The mapped input replaced the placeholder: `import/y` reads `feed`.
    let s = Session::new(&g, CpuDevice::shared());
    let values = s.run(&[], &[&y], &[]).unwrap();
    assert_eq!(values[0].to_vec::<f32>().unwrap(), [7.0, -1.0]);
    // The second copy still has its placeholder.
    let x = g.tensor("import_1/x:0").unwrap();
    let fed = Tensor::from_slice(&[0.5f32, 1.0], [2], &CpuDevice::shared()).unwrap();
    let y1 = output(&second[0]);
    let values = s.run(&[(&x, &fed)], &[&y1], &[]).unwrap();
    assert_eq!(values[0].to_vec::<f32>().unwrap(), [2.0, 3.0]);
    // Colocations follow the prefix.
    let def = g.to_graph_def();
    let y_node = def.node.iter().find(|n| n.name == "import_1/y").unwrap();
    let class = &y_node.attr["_class"];
    assert_eq!(
        class,
        &AttrValue::from(ListValue {
            s: vec![b"loc:@import_1/x".to_vec()],
            ..Default::default()
        })
    );
}

#[test]
fn import_errors_name_what_is_wrong_and_change_nothing() {
    let def = model().to_graph_def();
    let mut g = Graph::new();
    let stray = g.constant(1.0f32).unwrap();
    let before = g.len();
    let unknown = ImportOptions {
        input_map: vec![("nope:0".into(), stray.clone())],
        ..ImportOptions::with_prefix("a")
    };
    let error = g.import_graph_def(&def, &unknown).unwrap_err().to_string();
    assert!(
        error.contains("Attempted to map inputs that were not found in graph_def: [nope:0]"),
        "{error}"
    );
    let missing = ImportOptions {
        return_elements: vec!["z:0".into()],
        ..ImportOptions::with_prefix("b")
    };
    let error = g.import_graph_def(&def, &missing).unwrap_err().to_string();
    assert!(
        error.contains("Requested return tensor 'z:0' not found in graph def"),
        "{error}"
    );
    // Without a prefix, a name the graph has is a duplicate; the import adds nothing.
    let mut g2 = Graph::new();
    g2.constant_named("two", &[5.0f32], &[]).unwrap();
    let error = g2
        .import_graph_def(&def, &ImportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("Duplicate node name in graph: 'two'"),
        "{error}"
    );
    assert_eq!(g2.len(), 1);
    // A mapped input of the wrong dtype is refused as TensorFlow refuses it.
    let ints = g.constant_values(&[1i32, 2], &[2]).unwrap();
    let wrong = ImportOptions {
        input_map: vec![("x".into(), ints)],
        ..ImportOptions::with_prefix("c")
    };
    let error = g.import_graph_def(&def, &wrong).unwrap_err().to_string();
    assert!(
        error.contains("incompatible with expected float"),
        "{error}"
    );
    assert_eq!(g.len(), before + 1);
    assert!(g.operation("c/x").is_none() && g.operation("a/x").is_none());
}

#[test]
fn a_session_takes_in_operations_added_after_it_was_made() {
    let mut g = Graph::new();
    let a = g.constant(3.0f32).unwrap();
    let mut s = Session::new(&g, CpuDevice::shared());
    assert_eq!(
        s.run(&[], &[&a], &[]).unwrap()[0].item::<f32>().unwrap(),
        3.0
    );
    // Grown by an import: the session runs the new operations once extended.
    let def = model().to_graph_def();
    let options = ImportOptions {
        input_map: vec![(
            "x:0".into(),
            g.constant_values(&[1.0f32, 2.0], &[2]).unwrap(),
        )],
        return_elements: vec!["y:0".into()],
        ..ImportOptions::with_prefix("m")
    };
    let y = output(&g.import_graph_def(&def, &options).unwrap()[0]);
    assert!(s.run(&[], &[&y], &[]).is_err());
    s.extend(&g).unwrap();
    assert_eq!(
        s.run(&[], &[&y], &[]).unwrap()[0].to_vec::<f32>().unwrap(),
        [3.0, 5.0]
    );
    // Another graph is not a growth of this one.
    let error = s.extend(&Graph::new()).unwrap_err().to_string();
    assert!(error.contains("not another graph"), "{error}");
}
