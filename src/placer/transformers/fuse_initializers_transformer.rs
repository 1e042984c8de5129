//! ORT's `FuseInitializersTransformer` (`onnxruntime/core/optimizer/fuse_initializers_transformer.cc`),
//! which ORT runs at level `all` (its Level4) right after `InsertCastTransformer`: an
//! `InsertedPrecisionFreeCast_*` (any `Cast`) that turns a float16 initializer into float for one
//! consumer is removed, the consumer reading a float copy of the initializer instead, named
//! `GenerateNodeArgName("FusedBack_" + <the Cast's output without the InsertedPrecisionFreeCast_
//! prefix>)`. When it changed the graph, ORT runs the level-2 and level-3 transformers again (the
//! nodes the Casts moved to the CPU in float32 can now be fused): the session script does that.
//!
//! The conditions (`IsCastNodeWithConstraints`, `IsNodeValidForFusion`): a `Cast` whose input no
//! node produces, with exactly one output edge, not producing a graph output, whose input is an
//! initializer of type float16 and whose output is float. Only the main graph (the transformer does
//! not recurse). Measured with the CPU wheels (1.23.2, 1.24.4, 1.31.1) on
//! `tests/fixtures/realworld/fp16*` and the public corpus's float16 decoders: the Casts on
//! weights are gone at `all` and kept at `extended`.

use crate::infer::Type;
use crate::model::DataType as D;
use crate::placer::OptLevel;
use crate::session::{Init, NameGen, Session};
use crate::sym::Sym;

/// Float copies of initializers up to this many elements carry their values (later transformers
/// read small constants such as Clip bounds); larger ones carry the shape only.
const MAX_CONVERTED_ELEMENTS: u64 = 1 << 16;

/// Applies the transformer to the main graph. Returns whether it changed anything.
pub fn run(session: &mut Session, level: OptLevel) -> bool {
    if level < OptLevel::All || session.graphs.is_empty() {
        return false;
    }
    let gi = 0;
    // Only a Cast reading a float16 initializer is a candidate: a graph without one is skipped
    // before its order and edges are built.
    let candidate = session.graphs[gi].any_live_node(|n| {
        n.op == Sym::CAST
            && n.inputs.first().is_some_and(|x| {
                session.graphs[gi]
                    .initializers
                    .get(x)
                    .is_some_and(|i| i.elem == D::Float16 as i32)
            })
    });
    if !candidate {
        return false;
    }
    let order = crate::session::edit::order_of(session, gi, crate::session::edit::Order::Dfs);
    let mut ed = crate::session::edit::Editor::open(session, gi);
    let g = &session.graphs[gi];
    let mut fused: Vec<(usize, usize, usize)> = Vec::new();
    for ni in order {
        let n = &g.nodes[ni];
        if n.removed || n.op != Sym::CAST || n.domain != Sym::AI_ONNX {
            continue;
        }
        let (Some(x), Some(y)) = (n.inputs.first(), n.outputs.first()) else {
            continue;
        };
        if x.is_empty() || y.is_empty() || ed.producer(session, *x).is_some() {
            continue;
        }
        // Reading slots (ORT's output edges).
        let consumers = ed.reader_slots(session, *y);
        if consumers.len() != 1 || ed.is_output(*y) {
            continue;
        }
        let crate::session::EdgeEnd { node: c, arg: slot } = consumers[0];
        let fp16 = g
            .initializers
            .get(x)
            .is_some_and(|i| i.elem == D::Float16 as i32);
        let to_float = g.types.get(y) == Some(&Type::Tensor(D::Float as i32));
        if fp16 && to_float && slot != usize::MAX {
            fused.push((ni, c, slot));
        }
    }
    if fused.is_empty() {
        return false;
    }
    let mut names = NameGen::new(&session.graphs[gi]);
    // ORT collects the Casts into a `std::set` of node indices and fuses them in index order.
    fused.sort_unstable();
    for (cast, consumer, slot) in fused {
        let g = &mut session.graphs[gi];
        let x = g.nodes[cast].inputs[0];
        let y = g.nodes[cast].outputs[0];
        let base = format!(
            "FusedBack_{}",
            y.replacen("InsertedPrecisionFreeCast_", "", 1)
        );
        let name = names.value(&base);
        let Some(init) = g.initializers.get(&x).cloned() else {
            continue;
        };
        let copy = float_copy(&init, name);
        g.types.insert(name, Type::Tensor(D::Float as i32));
        g.shapes
            .insert(name, copy.dims.iter().map(|&d| Some(d)).collect());
        g.initializers.insert(name, copy);
        g.init_order.push(name);
        ed.set_input(session, crate::session::EdgeEnd::new(consumer, slot), name);
        ed.remove(session, cast);
    }
    session.graphs[gi].name_counter = names.counter;
    ed.keep(session);
    true
}

/// The initializer converted to float: values for small ones, the shape only for large ones.
fn float_copy(init: &Init, name: Sym) -> Init {
    let mut tensor = crate::model::proto::TensorProto {
        dims: init.dims.clone(),
        data_type: Some(D::Float as i32),
        name: Some(name.to_string()),
        ..Default::default()
    };
    if init.elements().is_some_and(|n| n <= MAX_CONVERTED_ELEMENTS) {
        tensor.float_data = half_values(&init.tensor);
    }
    Init {
        dims: init.dims.clone(),
        elem: D::Float as i32,
        overridable: false,
        tensor: Box::new(tensor),
    }
}

/// The values of a float16 tensor (raw data or `int32_data`), as float.
fn half_values(t: &crate::model::proto::TensorProto) -> Vec<f32> {
    if let Some(raw) = t.raw_data.as_ref().filter(|r| !r.is_empty()) {
        return raw
            .chunks_exact(2)
            .map(|b| half_to_f32(u16::from_le_bytes([b[0], b[1]])))
            .collect();
    }
    t.int32_data
        .iter()
        .map(|&v| half_to_f32(u16::try_from(v).unwrap_or(0)))
        .collect()
}

fn half_to_f32(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((h >> 10) & 0x1f);
    let frac = f32::from(h & 0x3ff);
    sign * match exp {
        0 => frac * 2f32.powi(-24),
        31 if frac == 0.0 => f32::INFINITY,
        31 => f32::NAN,
        _ => (1.0 + frac / 1024.0) * 2f32.powi(exp - 15),
    }
}

#[cfg(test)]
mod tests {
    use super::half_to_f32;

    #[test]
    fn halves_convert() {
        assert_eq!(half_to_f32(0x3c00), 1.0);
        assert_eq!(half_to_f32(0xc000), -2.0);
        assert_eq!(half_to_f32(0x0000), 0.0);
        assert!(half_to_f32(0x7c00).is_infinite());
        assert!(half_to_f32(0x7e00).is_nan());
    }
}
