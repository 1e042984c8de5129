//! The proof of a shape constant: the vector that can replace the shape input of a `Reshape`,
//! `Expand`, `Tile` or `ConstantOfShape` computed at run time, derived the way ORT computes the
//! output shape, over the symbolic shapes of [`crate::infer::symbolic`].
//!
//! - `Reshape`: an element equal to the data input's dim at the same position becomes `0`
//!   (ORT copies that dim; not with `allowzero = 1`, where `0` means an empty dim); a constant
//!   element stays; one element left over becomes `-1` (ORT infers it from the total size, which
//!   the original shape had to preserve anyway), at most once and only when the shape has no
//!   `-1` already.
//! - `Expand`: an element equal to the data input's dim it broadcasts against becomes `1`
//!   (broadcasting keeps the data's dim); a constant stays.
//! - `Tile`, `ConstantOfShape`: every element must be a constant.

use crate::infer::symbolic::{Dim, Shapes};
use crate::session::SNode;

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

/// Why no constant was proven.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unproven {
    /// The analysis lost track of something: a constant may exist.
    Unknown(String),
    /// Every dim involved is known, and no constant gives the same output for every value of
    /// the model's dims (a view that splits `batch·seq` back into `batch`, `seq`).
    NoConstant(String),
}

impl std::fmt::Display for Unproven {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unproven::Unknown(s) | Unproven::NoConstant(s) => f.write_str(s),
        }
    }
}

/// Proves the constant that replaces the shape input of `node` (of session graph `gi`), or
/// says which element could not be proven.
pub fn prove(sh: &Shapes, gi: usize, node: &SNode) -> Result<Proof, Unproven> {
    let data = node
        .inputs
        .first()
        .filter(|_| shape_input(&node.op) == Some(1))
        .and_then(|d| sh.shape(gi, *d));
    prove_on(sh, gi, node, data)
}

/// [`prove`] against `data`, the shape of the data input `node` reads (or of a value it could
/// read instead: the input of a pure view that feeds it).
pub fn prove_on(
    sh: &Shapes,
    gi: usize,
    node: &SNode,
    data: Option<&[Dim]>,
) -> Result<Proof, Unproven> {
    let unknown = Unproven::Unknown;
    let k =
        shape_input(&node.op).ok_or_else(|| unknown(format!("{} has no shape input", node.op)))?;
    let name = node
        .inputs
        .get(k)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| unknown("the shape input is missing".to_string()))?;
    let elems = sh
        .value(gi, *name)
        .ok_or_else(|| unknown(format!("the elements of `{name}` are not known statically")))?;
    let out = node.outputs.first().and_then(|o| sh.shape(gi, *o));
    let unproven = |i: usize, e: &Dim| format!("element {i} (`{e}`) is not a constant");
    let data_text = |d: &[Dim]| {
        format!(
            "[{}]",
            d.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
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
            let open_of =
                |v: &[Option<i64>]| (0..v.len()).filter(|&i| v[i].is_none()).collect::<Vec<_>>();
            // The shape's own `-1` is freed, for an element that needs it, where its output dim
            // is a constant or the data's dim at that position.
            let minus = values.iter().position(|v| *v == Some(-1));
            let minus_out = minus.and_then(|m| out.and_then(|o| o.get(m)));
            if let (Some(m), Some(o), false) = (minus, minus_out, open_of(&values).is_empty()) {
                let freed = match o.as_const() {
                    Some(c) if c > 0 => Some(c),
                    _ if !allowzero && data.and_then(|d| d.get(m)) == Some(o) => Some(0),
                    _ => None,
                };
                if freed.is_some() {
                    values[m] = freed;
                }
            }
            let open = open_of(&values);
            let inferred = match open.as_slice() {
                [] => false,
                [i] if !values.contains(&Some(-1)) => {
                    values[*i] = Some(-1);
                    true
                }
                [i, ..] => {
                    // Each open element can be neither a constant (it varies) nor `0` (the
                    // data's dim there differs), and only one can be `-1`.
                    // A `-1` still there is held by an output dim that varies and is not the
                    // data's dim at its position.
                    let stuck = values.iter().position(|v| *v == Some(-1));
                    let held = stuck.map(|m| (m, out.and_then(|o| o.get(m))));
                    let held_known = held.is_none_or(|(m, o)| {
                        o.is_some_and(|o| !o.opaque() && o.as_const().is_none())
                            && data.and_then(|d| d.get(m)).is_none_or(|x| !x.opaque())
                    });
                    let decided = data.filter(|d| {
                        !allowzero
                            && held_known
                            && open.iter().all(|&j| {
                                !elems[j].opaque() && d.get(j).is_none_or(|x| !x.opaque())
                            })
                    });
                    return Err(match decided {
                        Some(d) => Unproven::NoConstant(reshape_impossible(
                            elems,
                            &open,
                            d,
                            held.and_then(|(m, o)| Some((m, o?))),
                        )),
                        None => unknown(unproven(*i, &elems[*i])),
                    });
                }
            };
            let values: Vec<i64> = values.into_iter().flatten().collect();
            Ok(Proof { values, inferred })
        }
        "Expand" => {
            let data =
                data.ok_or_else(|| unknown("the data input's rank is not known".to_string()))?;
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
                    .ok_or_else(|| {
                        // Broadcasting keeps the data's dim (or a constant's): a dim the data
                        // does not have at that position cannot come from a constant.
                        let from = j.and_then(|j| data.get(j));
                        if from.is_none_or(|d| !d.opaque()) && !e.opaque() {
                            Unproven::NoConstant(format!(
                                "element {i} (`{e}`) is not a constant and the data input has {} there (data: {}): Expand's output dim there is the data's, or the constant where the data has 1 or no dim, so no constant gives it",
                                from.map(|d| format!("`{d}`")).unwrap_or_else(|| "no dim".into()),
                                data_text(data)
                            ))
                        } else {
                            unknown(unproven(i, e))
                        }
                    })
                })
                .collect::<Result<Vec<i64>, Unproven>>()?;
            Ok(Proof {
                values,
                inferred: false,
            })
        }
        _ => {
            let values = elems
                .iter()
                .enumerate()
                .map(|(i, e)| {
                    e.as_const().ok_or_else(|| {
                        if e.opaque() {
                            unknown(unproven(i, e))
                        } else {
                            Unproven::NoConstant(format!(
                                "element {i} (`{e}`) varies with the model's dims, and {} takes it as is",
                                node.op
                            ))
                        }
                    })
                })
                .collect::<Result<Vec<i64>, Unproven>>()?;
            Ok(Proof {
                values,
                inferred: false,
            })
        }
    }
}

/// Why a `Reshape` view has no constant: two or more elements are neither constants nor the
/// data's dim at their position, and `Reshape` infers one element at most (`-1`).
fn reshape_impossible(
    elems: &[Dim],
    open: &[usize],
    data: &[Dim],
    held: Option<(usize, &Dim)>,
) -> String {
    let list = open
        .iter()
        .filter_map(|&i| Some(format!("{i} (`{}`)", elems.get(i)?)))
        .collect::<Vec<_>>()
        .join(", ");
    let data_text = data
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let product = open
        .iter()
        .try_fold(Dim::konst(1), |acc, &i| acc.mul(elems.get(i)?));
    let what = match product.and_then(|p| data.iter().position(|d| *d == p)) {
        Some(j) => format!(
            "the view splits `{}` (dim {j} of the data) into {}",
            data.get(j).map(ToString::to_string).unwrap_or_default(),
            open.iter()
                .filter_map(|&i| Some(format!("`{}`", elems.get(i)?)))
                .collect::<Vec<_>>()
                .join(" and ")
        ),
        None => "the view moves, merges or splits dims of the data".to_string(),
    };
    let held = held
        .map(|(m, o)| format!(" (element {m} is the shape's `-1`, for `{o}`)"))
        .unwrap_or_default();
    let which = if open.len() == 1 {
        format!("element {list} is neither a constant nor the data input's dim at its position")
    } else {
        format!(
            "elements {list} are neither constants nor the data input's dims at their positions"
        )
    };
    format!(
        "no constant expresses this view for every value of the model's dims: {what}; {which} (data: [{data_text}]), and Reshape infers one element at most (-1){held}"
    )
}
