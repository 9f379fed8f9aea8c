//! A graph's function library: the serialized `FunctionDefLibrary` of the GraphDef the
//! graph came from, written back as read, and its functions decoded once, at import, by
//! name. A graph's functions and the functions they call share one library.

use std::collections::HashMap;

use polytensor_core::{Error, Result};
use prost::Message;

use crate::proto::{FunctionDef, FunctionDefLibrary};

/// A decoded function library and its bytes.
#[derive(Debug)]
pub(crate) struct Library {
    /// The library as read.
    pub(crate) bytes: Vec<u8>,
    functions: Vec<FunctionDef>,
    by_name: HashMap<String, usize>,
}

impl Library {
    /// The library serialized as `bytes`. `Err` for malformed bytes, and, with
    /// TensorFlow's message, for two different functions of one name (a function given
    /// twice the same is kept once).
    pub(crate) fn decode(bytes: Vec<u8>) -> Result<Library> {
        let functions = FunctionDefLibrary::decode_bytes(&bytes)?.function;
        let mut by_name = HashMap::with_capacity(functions.len());
        for (i, function) in functions.iter().enumerate() {
            let name = function
                .signature
                .as_ref()
                .map(|s| s.name.clone())
                .unwrap_or_default();
            if let Some(&first) = by_name.get(&name) {
                if functions[first] != *function {
                    return Err(Error::invalid(format!(
                        "Cannot add function '{name}' because a different function with the \
                         same name already exists."
                    )));
                }
                continue;
            }
            by_name.insert(name, i);
        }
        Ok(Library {
            bytes,
            functions,
            by_name,
        })
    }

    /// `library` (or an empty one) with `added` after its functions, their bytes appended
    /// to its own (a `FunctionDefLibrary`'s functions are a repeated field, so the bytes
    /// stay one valid library). `Err` for a name the library already has.
    pub(crate) fn extended(library: Option<&Library>, added: Vec<FunctionDef>) -> Result<Library> {
        let mut bytes = library.map_or_else(Vec::new, |l| l.bytes.clone());
        let (mut functions, mut by_name) = library
            .map(|l| (l.functions.clone(), l.by_name.clone()))
            .unwrap_or_default();
        bytes.extend(
            FunctionDefLibrary {
                function: added.clone(),
            }
            .encode_to_vec(),
        );
        for function in added {
            let name = function
                .signature
                .as_ref()
                .map(|s| s.name.clone())
                .unwrap_or_default();
            if by_name.contains_key(&name) {
                return Err(Error::invalid(format!(
                    "Cannot add function '{name}' because a different function with the same \
                     name already exists."
                )));
            }
            by_name.insert(name, functions.len());
            functions.push(function);
        }
        Ok(Library {
            bytes,
            functions,
            by_name,
        })
    }

    /// The function named `name`, or `None`.
    pub(crate) fn function(&self, name: &str) -> Option<&FunctionDef> {
        self.by_name.get(name).map(|&i| &self.functions[i])
    }

    /// The functions' names, in the library's order.
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        // (A function given twice is listed once.)
        self.functions
            .iter()
            .enumerate()
            .filter_map(|(i, f)| f.signature.as_ref().map(|s| (i, s.name.as_str())))
            .filter(|(i, name)| self.by_name.get(*name) == Some(i))
            .map(|(_, name)| name)
    }
}
