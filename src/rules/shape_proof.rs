//! The proof of a shape constant: the vector that can replace the shape input of a `Reshape`,
//! `Expand`, `Tile` or `ConstantOfShape` computed at run time, derived the way ORT computes the
//! output shape, over the symbolic shapes of [`crate::rules::symbolic`].
//!
//! - `Reshape`: an element equal to the data input's dim at the same position becomes `0`
//!   (ORT copies that dim; not with `allowzero = 1`, where `0` means an empty dim); a constant
//!   element stays; one element left over becomes `-1` (ORT infers it from the total size, which
//!   the original shape had to preserve anyway), at most once and only when the shape has no
//!   `-1` already.
//! - `Expand`: an element equal to the data input's dim it broadcasts against becomes `1`
//!   (broadcasting keeps the data's dim); a constant stays.
//! - `Tile`, `ConstantOfShape`: every element must be a constant.

use crate::placer::ir::SNode;
use crate::rules::symbolic::{Dim, Shapes};

/// A proven constant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proof {
    pub values: Vec<i64>,
    /// A `-1` was put in place of an element that is neither constant nor the input's dim.
    pub inferred: bool,
}

/// The position of the shape input of an op whose output shape is given by a tensor.
pub fn shape_input(op: &str) -> Option<usize> {
    match op {
        "Reshape" | "Expand" | "Tile" => Some(1),
        "ConstantOfShape" => Some(0),
        _ => None,
    }
}

/// Proves the constant that replaces the shape input of `node` (of session graph `gi`), or
/// says which element could not be proven.
pub fn prove(sh: &Shapes, gi: usize, node: &SNode) -> Result<Proof, String> {
    let k = shape_input(&node.op).ok_or_else(|| format!("{} has no shape input", node.op))?;
    let name = node
        .inputs
        .get(k)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| "the shape input is missing".to_string())?;
    let elems = sh
        .value(gi, name)
        .ok_or_else(|| format!("the elements of `{name}` are not known statically"))?;
    let data = node
        .inputs
        .first()
        .filter(|_| k == 1)
        .and_then(|d| sh.shape(gi, d));
    let out = node.outputs.first().and_then(|o| sh.shape(gi, o));
    let unproven = |i: usize, e: &Dim| format!("element {i} (`{e}`) is not a constant");
    match node.op.as_str() {
        "Reshape" => {
            let allowzero = node.attr_i("allowzero").unwrap_or(0) != 0;
            let mut values: Vec<Option<i64>> = Vec::with_capacity(elems.len());
            for (i, e) in elems.iter().enumerate() {
                let v = match e.as_const() {
                    Some(c) => Some(c),
                    None if !allowzero && data.and_then(|d| d.get(i)) == Some(e) => Some(0),
                    // The output dim is static (the session's inference knows it).
                    None => out
                        .and_then(|o| o.get(i))
                        .and_then(Dim::as_const)
                        .filter(|&c| c > 0),
                };
                values.push(v);
            }
            let open: Vec<usize> = (0..values.len()).filter(|&i| values[i].is_none()).collect();
            let inferred = match open.as_slice() {
                [] => false,
                [i] if !values.contains(&Some(-1)) => {
                    values[*i] = Some(-1);
                    true
                }
                [i, ..] => return Err(unproven(*i, &elems[*i])),
            };
            let values: Vec<i64> = values.into_iter().flatten().collect();
            Ok(Proof { values, inferred })
        }
        "Expand" => {
            let data = data.ok_or_else(|| "the data input's rank is not known".to_string())?;
            let offset = elems.len() as i64 - data.len() as i64;
            let values = elems
                .iter()
                .enumerate()
                .map(|(i, e)| {
                    if let Some(c) = e.as_const() {
                        return Ok(c);
                    }
                    let j = usize::try_from(i as i64 - offset).ok();
                    if j.and_then(|j| data.get(j)) == Some(e) {
                        return Ok(1);
                    }
                    out.and_then(|o| {
                        usize::try_from(i as i64 + (o.len() as i64 - elems.len() as i64))
                            .ok()
                            .and_then(|p| o.get(p))
                    })
                    .and_then(Dim::as_const)
                    .ok_or_else(|| unproven(i, e))
                })
                .collect::<Result<Vec<i64>, String>>()?;
            Ok(Proof {
                values,
                inferred: false,
            })
        }
        _ => {
            let values = elems
                .iter()
                .enumerate()
                .map(|(i, e)| e.as_const().ok_or_else(|| unproven(i, e)))
                .collect::<Result<Vec<i64>, String>>()?;
            Ok(Proof {
                values,
                inferred: false,
            })
        }
    }
}
