//! The TransposeOptimizer's per-op handlers (`HandleTranspose`, `HandleReshape`, `HandleShape`,
//! `HandleReduceOps`, `HandleSlice`, ... in `core/optimizer/transpose_optimization/
//! transpose_optimizer.cc`) and the dispatch over them.

use super::*;

pub(super) fn permute_1d(t: &Tensor, perm: &[i64]) -> Option<Tensor> {
    use crate::infer::eval::Data;
    if t.dims.len() != 1 || t.len() != perm.len() {
        return None;
    }
    let data = match &t.data {
        Data::Int(v) => Data::Int(perm.iter().map(|&p| v[p as usize]).collect()),
        Data::Float(v) => Data::Float(perm.iter().map(|&p| v[p as usize]).collect()),
    };
    Some(Tensor {
        elem: t.elem,
        dims: t.dims.clone(),
        data,
    })
}

/// `FinalizeReshapeShape`: the Reshape's output dims for a concrete input shape.
pub(super) fn finalize_reshape(
    input: &[i64],
    requested: &[i64],
    allow_zero: bool,
) -> Option<Vec<i64>> {
    if input.iter().any(|&d| d < 0) || input.len() != requested.len() {
        return None;
    }
    let total: i64 = input.iter().try_fold(1i64, |a, &d| a.checked_mul(d))?;
    let mut out = requested.to_vec();
    let mut unknown = None;
    let mut size = 1i64;
    for i in 0..requested.len() {
        if requested[i] == -1 {
            if unknown.is_some() {
                return None;
            }
            unknown = Some(i);
        } else {
            if !allow_zero && requested[i] == 0 {
                out[i] = input[i];
            }
            size = size.checked_mul(out[i])?;
        }
    }
    match unknown {
        Some(u) => {
            if size == 0 || total % size != 0 {
                return None;
            }
            out[u] = total / size;
        }
        None if size != total => return None,
        None => {}
    }
    Some(out)
}

impl Opt<'_> {
    pub(super) fn handle(
        &mut self,
        h: Handler,
        t: usize,
        node: usize,
        perm: &[i64],
        inv: &[i64],
        indices: &[usize],
    ) -> bool {
        let rank = perm.len();
        match h {
            Handler::Simple | Handler::FirstInput => self.simple(node, perm, inv, indices, false),
            Handler::Broadcast | Handler::QLinearBinary => {
                self.simple(node, perm, inv, indices, true)
            }
            Handler::Concat | Handler::Split | Handler::QLinearConcat => {
                let default = (h == Handler::Split).then_some(0);
                let Some(axis) = self.node(node).attr_i("axis").or(default) else {
                    return false;
                };
                let Some(axis) = normalize_axis(axis, rank) else {
                    return false;
                };
                if !self.simple(node, perm, inv, indices, false) {
                    return false;
                }
                self.set_attr(node, int_attr("axis", perm[axis as usize]));
                true
            }
            Handler::SoftMax => {
                if self.opset >= 13 {
                    let axis = self.node(node).attr_i("axis").unwrap_or(-1);
                    let Some(axis) = normalize_axis(axis, rank) else {
                        return false;
                    };
                    self.simple(node, perm, inv, indices, false);
                    self.set_attr(node, int_attr("axis", perm[axis as usize]));
                    return true;
                }
                let axis = self.node(node).attr_i("axis").unwrap_or(1);
                let Some(axis) = normalize_axis(axis, rank) else {
                    return false;
                };
                if (0..rank).any(|i| ((i as i64) < axis) != (perm[i] < axis)) {
                    return false;
                }
                self.simple(node, perm, inv, indices, false)
            }
            Handler::Transpose => {
                let Some(node_perm) = self.perm_of(node) else {
                    return false;
                };
                if node_perm.len() != rank {
                    return false;
                }
                self.handle_transpose_impl(t, node, perm, inv, &node_perm)
            }
            Handler::Reshape => self.handle_reshape(t, node, perm, inv),
            Handler::Shape => self.handle_shape(node, perm, inv, indices),
            Handler::Unsqueeze => {
                let Some(axes) = self.read_axes(node, 1, 13) else {
                    return false;
                };
                let Some(axes) = normalize_axes(&axes, rank + axes.len()) else {
                    return false;
                };
                self.help_handle_unsqueeze(node, inv, perm, &axes);
                true
            }
            Handler::Squeeze => {
                let Some(axes) = self.read_axes(node, 1, 13) else {
                    return false;
                };
                let Some(axes) = normalize_axes(&axes, rank) else {
                    return false;
                };
                let new_axes = sorted_axes_for_transposed_input(&axes, perm);
                if self.opset < 13 {
                    self.set_attr(node, ints_attr("axes", &new_axes));
                } else {
                    let old = self.node(node).inputs[1];
                    let c = self.add_initializer(Tensor::i64_1d(new_axes.clone()));
                    self.set_input(node, 1, c);
                    if !self.has_consumers(old) {
                        self.remove_initializer(old);
                    }
                }
                self.transpose_inputs(node, inv, &[0]);
                self.transpose_outputs(node, &squeeze_perm(&new_axes, perm));
                true
            }
            Handler::Reduce => self.handle_reduce(node, perm, inv),
            Handler::ArgMinMax => {
                let keepdims = self.node(node).attr_i("keepdims").unwrap_or(1);
                let axis = self.node(node).attr_i("axis").unwrap_or(0);
                let Some(axis) = normalize_axis(axis, rank) else {
                    return false;
                };
                let new_axis = perm[axis as usize];
                self.set_attr(node, int_attr("axis", new_axis));
                self.transpose_inputs(node, inv, indices);
                if keepdims != 0 {
                    self.transpose_outputs(node, perm);
                } else {
                    self.transpose_outputs(node, &squeeze_perm(&[new_axis], perm));
                }
                true
            }
            Handler::Slice => self.handle_slice(node, perm, inv),
            Handler::Tile => {
                let repeats = self.node(node).inputs.get(1).cloned().unwrap_or_default();
                if let Some(r) = self.constant_ints(repeats) {
                    if r.len() != rank {
                        return false;
                    }
                    let new: Vec<i64> = inv.iter().map(|&p| r[p as usize]).collect();
                    let c = self.add_initializer(Tensor::i64_1d(new));
                    self.set_input(node, 1, c);
                    if !self.has_consumers(repeats) {
                        self.remove_initializer(repeats);
                    }
                } else {
                    let c = self.add_initializer(Tensor::i64_1d(inv.to_vec()));
                    let g = self.add_node("Gather", &[repeats, c], 1);
                    self.set_attr(g, int_attr("axis", 0));
                    let out = self.node(g).outputs[0];
                    self.copy_value_info(repeats, out);
                    self.set_input(node, 1, out);
                }
                self.transpose_inputs(node, inv, &[0]);
                self.transpose_outputs(node, perm);
                true
            }
            Handler::Pad => {
                let mut pads_perm = inv.to_vec();
                pads_perm.extend(inv.iter().map(|&p| p + rank as i64));
                if self.opset < 11 {
                    let Some(pads) = self.node(node).attr_ints("pads").map(<[i64]>::to_vec) else {
                        return false;
                    };
                    if pads.len() != 2 * rank {
                        return false;
                    }
                    let new: Vec<i64> = pads_perm.iter().map(|&i| pads[i as usize]).collect();
                    self.set_attr(node, ints_attr("pads", &new));
                } else {
                    self.permute_input(node, 1, &pads_perm);
                }
                self.transpose_inputs(node, inv, &[0]);
                self.transpose_outputs(node, perm);
                true
            }
            Handler::QuantDequant => {
                if self.opset >= 13 {
                    let scale = self.node(node).inputs.get(1).cloned().unwrap_or_default();
                    let scalar = self.shape(scale).is_some_and(|s| s.is_empty());
                    if !scalar {
                        let axis = self.node(node).attr_i("axis").unwrap_or(1);
                        let Some(axis) = normalize_axis(axis, rank) else {
                            return false;
                        };
                        self.set_attr(node, int_attr("axis", perm[axis as usize]));
                    }
                }
                self.transpose_inputs(node, inv, &[0]);
                self.transpose_outputs(node, perm);
                true
            }
            Handler::Never => false,
            Handler::MaxPool => self.handle_max_pool(node, perm, inv),
            Handler::QLinearPool => self.handle_qlinear_pool(node, perm, inv),
            Handler::Resize => self.handle_resize(node, perm, inv),
        }
    }

    /// ORT's `EPAwareHandleResize` then `HandleResize`: for a CPU `Resize` under an
    /// NCHW-to-NHWC (or inverse) Transpose of rank 4, `roi` (doubled perm) and `scales`/`sizes`
    /// permuted (a permuted constant, else a `Gather`; the attribute order below opset 11), the
    /// input transposed and the Transpose moved to the output.
    fn handle_resize(&mut self, node: usize, perm: &[i64], inv: &[i64]) -> bool {
        let cpu = Some(crate::tables::Ep::Cpu);
        if self.provider != cpu
            || self.node(node).ep != cpu
            || !(perm == [0, 2, 3, 1] || perm == [0, 3, 1, 2])
        {
            return false;
        }
        let rank = perm.len() as i64;
        let inputs = self.node(node).inputs.clone();
        if self.opset < 11 {
            self.permute_input(node, 1, inv);
        } else {
            if inputs.get(1).is_some_and(|i| !i.is_empty()) {
                let mut double: Vec<i64> = inv.to_vec();
                double.extend(inv.iter().map(|&p| p + rank));
                self.permute_input(node, 1, &double);
            }
            for (i, name) in inputs.iter().enumerate().skip(2) {
                if !name.is_empty() {
                    self.permute_input(node, i, inv);
                }
            }
        }
        self.transpose_inputs(node, inv, &[0]);
        self.transpose_outputs(node, perm);
        true
    }

    /// ORT's `HandleQLinearPoolOp`: under a channels-last-to-first Transpose a channels-first
    /// pool (or under the inverse a channels-last one) flips `channels_last` and moves the
    /// Transpose to its output. Only in the optimizer's runs for the CPU provider.
    fn handle_qlinear_pool(&mut self, node: usize, perm: &[i64], inv: &[i64]) -> bool {
        let rank = perm.len() as i64;
        if self.provider.is_none() || rank < 2 {
            return false;
        }
        let to_first: Vec<i64> = [0, rank - 1].into_iter().chain(1..rank - 1).collect();
        let last = self.node(node).attr_i("channels_last").unwrap_or(0);
        if !((last == 0 && perm == to_first.as_slice())
            || (last != 0 && inv == to_first.as_slice()))
        {
            return false;
        }
        self.set_attr(node, int_attr("channels_last", 1 - i64::from(last != 0)));
        self.transpose_inputs(node, inv, &[0]);
        self.transpose_outputs(node, perm);
        true
    }

    /// ORT's `HandleMaxPool` (`ort_transpose_optimization.cc`): a CPU `MaxPool` of uint8/int8
    /// data, without its indices output, under a channels-last-to-first Transpose becomes
    /// `com.microsoft` `NhwcMaxPool` (`SwapNodeOpTypeDomainAndSinceVersion`: a copy named
    /// `GenerateNodeName(<name>)` without `storage_order`, the outputs moved to it), its input
    /// and output transposed.
    fn handle_max_pool(&mut self, node: usize, perm: &[i64], inv: &[i64]) -> bool {
        use crate::model::DataType as D;
        let cpu = Some(crate::tables::Ep::Cpu);
        let n = self.node(node);
        if self.provider != cpu || n.ep != cpu || n.outputs.get(1).is_some_and(|o| !o.is_empty()) {
            return false;
        }
        let eight_bit = n
            .inputs
            .first()
            .and_then(|i| self.session.type_of(self.gi, *i))
            .is_some_and(|t| {
                *t == Type::Tensor(D::Uint8 as i32) || *t == Type::Tensor(D::Int8 as i32)
            });
        let rank = perm.len() as i64;
        let to_first: Vec<i64> = [0, rank - 1].into_iter().chain(1..rank - 1).collect();
        if !eight_bit || rank < 3 || perm != to_first.as_slice() {
            return false;
        }
        let (old, inputs, outputs) = (n.name, n.inputs.clone(), n.outputs.len());
        let origin = n.origin;
        let attrs: Vec<AttributeProto> = n
            .attrs
            .iter()
            .filter(|a| a.name() != "storage_order")
            .cloned()
            .collect();
        let name = self.names().node(&old);
        self.generated.push(name);
        let pool = SNode {
            name,
            op: "NhwcMaxPool".into(),
            domain: Sym::COM_MICROSOFT,
            since: Some(1),
            inputs,
            outputs: Vec::new(),
            attrs: attrs.into(),
            subgraphs: thin_vec::ThinVec::new(),
            implicit_inputs: thin_vec::ThinVec::new(),
            ep: self.provider,
            kernel: None,
            origin,
            removed: false,
        };
        let index = self.ed.add(self.session, pool);
        for j in 0..outputs {
            if !self.node(node).outputs[j].is_empty() {
                self.move_output(node, j, index, j);
            }
        }
        self.remove_node(node);
        self.transpose_inputs(index, inv, &[0]);
        self.transpose_outputs(index, perm);
        true
    }

    /// `HandleSimpleNodeBase`.
    pub(super) fn simple(
        &mut self,
        node: usize,
        perm: &[i64],
        inv: &[i64],
        indices: &[usize],
        broadcast: bool,
    ) -> bool {
        if broadcast && !self.normalize_input_ranks(node, perm.len(), indices) {
            return false;
        }
        self.transpose_inputs(node, inv, indices);
        self.transpose_outputs(node, perm);
        true
    }

    /// `PermuteInput`: a 1-D input permuted, as a new initializer or through a `Gather`.
    pub(super) fn permute_input(&mut self, node: usize, i: usize, perm: &[i64]) {
        let name = self.node(node).inputs.get(i).cloned().unwrap_or_default();
        if name.is_empty() {
            return;
        }
        if let Some(v) = self.values.get(self.session, self.gi, name)
            && v.dims.len() == 1
            && (v.dims[0] == perm.len() as i64 || v.dims[0] == 0)
        {
            let t = permute_1d(&v, perm).unwrap_or_else(|| (*v).clone());
            let c = self.add_initializer(t);
            self.set_input(node, i, c);
            if !self.has_consumers(name) {
                self.remove_initializer(name);
            }
            return;
        }
        let c = self.add_initializer(Tensor::i64_1d(perm.to_vec()));
        let g = self.add_node("Gather", &[name, c], 1);
        let out = self.node(g).outputs[0];
        self.copy_value_info(name, out);
        self.set_attr(g, int_attr("axis", 0));
        self.set_input(node, i, out);
    }

    pub(super) fn handle_transpose_impl(
        &mut self,
        t: usize,
        node: usize,
        perm: &[i64],
        inv: &[i64],
        node_perm: &[i64],
    ) -> bool {
        let t_in = self.node(t).inputs.first().cloned().unwrap_or_default();
        if inv == node_perm {
            // RemoveCancelingTransposeNodes.
            let node_out = self.node(node).outputs[0];
            let (consumers, comprehensive) = self.consumers(node_out);
            if comprehensive {
                self.replace_references(&consumers, node_out, t_in);
            } else {
                let (in_consumers, in_comprehensive) = self.consumers(t_in);
                match self.producer(t_in) {
                    Some(p) if in_comprehensive => {
                        self.set_input(node, 0, Sym::EMPTY);
                        self.replace_references(&in_consumers, t_in, node_out);
                        let i = self
                            .node(p)
                            .outputs
                            .iter()
                            .position(|o| *o == t_in)
                            .unwrap_or(0);
                        self.move_output(node, 0, p, i);
                    }
                    _ => {
                        let id = self.add_node("Identity", &[Sym::EMPTY], 1);
                        self.move_output(node, 0, id, 0);
                        self.set_input(id, 0, t_in);
                    }
                }
            }
            self.remove_node(node);
            let t_out = self.node(t).outputs[0];
            if !self.has_consumers(t_out) {
                self.remove_node(t);
            }
            return true;
        }
        let new_perm = compose(perm, node_perm);
        let target = if self.node(node).op == Sym::RESHAPE {
            let n = self.add_node("Transpose", &[t_in], 1);
            self.move_output(node, 0, n, 0);
            self.remove_node(node);
            n
        } else {
            self.set_input(node, 0, t_in);
            node
        };
        self.set_attr(target, ints_attr("perm", &new_perm));
        let t_out = self.node(t).outputs[0];
        if !self.has_consumers(t_out) {
            self.remove_node(t);
        }
        true
    }

    /// `HandleReshape`: a Reshape that only moves dims of size 1 acts as a Transpose.
    pub(super) fn handle_reshape(
        &mut self,
        t: usize,
        node: usize,
        perm: &[i64],
        inv: &[i64],
    ) -> bool {
        let t_in = self.node(t).inputs[0];
        let t_out = self.node(t).outputs[0];
        let (Some(in_shape), Some(out_shape)) = (self.shape(t_in), self.shape(t_out)) else {
            return false;
        };
        let requested_name = self.node(node).inputs.get(1).cloned().unwrap_or_default();
        let Some(requested) = self.constant_ints(requested_name) else {
            return false;
        };
        if requested.is_empty() || in_shape.len() != requested.len() {
            return false;
        }
        let allow_zero = self.node(node).since.unwrap_or(0) > 13
            && self.node(node).attr_i("allowzero").unwrap_or(0) != 0;
        let Some(input_dims) = out_shape.iter().copied().collect::<Option<Vec<i64>>>() else {
            return false;
        };
        let Some(final_shape) = finalize_reshape(&input_dims, &requested, allow_zero) else {
            return false;
        };
        let mut dims = input_dims.clone();
        let mut perms = Vec::with_capacity(final_shape.len());
        for &target in &final_shape {
            let mut cur = 0;
            while dims[cur] != target {
                if dims[cur] != -1 && dims[cur] != 1 && target != 1 {
                    return false;
                }
                cur += 1;
                if cur == dims.len() {
                    return false;
                }
            }
            perms.push(cur as i64);
            dims[cur] = -1;
        }
        self.handle_transpose_impl(t, node, perm, inv, &perms)
    }

    pub(super) fn handle_shape(
        &mut self,
        node: usize,
        perm: &[i64],
        inv: &[i64],
        indices: &[usize],
    ) -> bool {
        self.transpose_inputs(node, inv, indices);
        let rank = perm.len() as i64;
        let new_perm: Vec<i64> = if self.opset >= 15 {
            let n = self.node(node);
            let mut start = n.attr_i("start").unwrap_or(0);
            let mut end = n.attr_i("end").unwrap_or(rank);
            if start < 0 {
                start += rank;
            }
            if end < 0 {
                end += rank;
            }
            let s = start.clamp(0, rank) as usize;
            let e = end.clamp(0, rank) as usize;
            let v = perm
                .get(s..e.max(s))
                .map(<[i64]>::to_vec)
                .unwrap_or_default();
            self.node_mut(node)
                .attrs
                .retain(|a| a.name() != "start" && a.name() != "end");
            v
        } else {
            perm.to_vec()
        };
        let c = self.add_initializer(Tensor::i64_1d(new_perm.clone()));
        let g = self.add_node("Gather", &[Sym::EMPTY, c], 1);
        self.set_attr(g, int_attr("axis", 0));
        self.move_output(node, 0, g, 0);
        let new_output = self.node(node).outputs[0];
        self.set_input(g, 0, new_output);
        let g_out = self.node(g).outputs[0];
        self.copy_value_info(g_out, new_output);
        if new_perm.len() != perm.len() {
            self.set_shape(new_output, Some(vec![Some(rank)]));
        }
        true
    }

    pub(super) fn handle_reduce(&mut self, node: usize, perm: &[i64], inv: &[i64]) -> bool {
        let n = self.node(node);
        let keepdims = n.attr_i("keepdims").unwrap_or(1) != 0;
        let attr_axes =
            (n.op == "ReduceSum" && self.opset < 13) || (n.op != "ReduceSum" && self.opset < 18);
        if attr_axes {
            let axes = n.attr_ints("axes").map(<[i64]>::to_vec);
            let out_perm = match axes {
                None => {
                    if keepdims {
                        perm.to_vec()
                    } else {
                        Vec::new()
                    }
                }
                Some(axes) => {
                    let Some(axes) = normalize_axes(&axes, perm.len()) else {
                        return false;
                    };
                    let new_axes = sorted_axes_for_transposed_input(&axes, perm);
                    self.set_attr(node, ints_attr("axes", &new_axes));
                    if keepdims {
                        perm.to_vec()
                    } else {
                        squeeze_perm(&new_axes, perm)
                    }
                }
            };
            self.transpose_inputs(node, inv, &[0]);
            self.transpose_outputs(node, &out_perm);
            return true;
        }
        let axes_name = n.inputs.get(1).cloned().unwrap_or_default();
        let axes = if axes_name.is_empty() {
            Some(Vec::new())
        } else {
            self.constant_ints(axes_name)
        };
        let Some(axes) = axes else {
            return false;
        };
        if axes.is_empty() {
            let noop = self.node(node).attr_i("noop_with_empty_axes").unwrap_or(0) != 0;
            self.transpose_inputs(node, inv, &[0]);
            if noop || keepdims {
                self.transpose_outputs(node, perm);
            }
            return true;
        }
        let Some(axes) = normalize_axes(&axes, perm.len()) else {
            return false;
        };
        let new_axes = sorted_axes_for_transposed_input(&axes, perm);
        let c = self.add_initializer(Tensor::i64_1d(new_axes.clone()));
        self.set_input(node, 1, c);
        if !self.has_consumers(axes_name) {
            self.remove_initializer(axes_name);
        }
        self.transpose_inputs(node, inv, &[0]);
        if keepdims {
            self.transpose_outputs(node, perm);
        } else {
            self.transpose_outputs(node, &squeeze_perm(&new_axes, perm));
        }
        true
    }

    pub(super) fn handle_slice(&mut self, node: usize, perm: &[i64], inv: &[i64]) -> bool {
        let rank = perm.len();
        if self.opset < 10 {
            let n = self.node(node);
            let axes = match n.attr_ints("axes") {
                Some(a) => a.to_vec(),
                None => {
                    let k = n.attr_ints("starts").map_or(0, <[i64]>::len);
                    (0..k as i64).collect()
                }
            };
            let Some(axes) = normalize_axes(&axes, rank) else {
                return false;
            };
            let new_axes: Vec<i64> = axes.iter().map(|&a| perm[a as usize]).collect();
            self.set_attr(node, ints_attr("axes", &new_axes));
            self.transpose_inputs(node, inv, &[0]);
            self.transpose_outputs(node, perm);
            return true;
        }
        let inputs = self.node(node).inputs.clone();
        let axes_name = inputs.get(3).cloned().unwrap_or_default();
        if axes_name.is_empty() {
            let starts = inputs.get(1).cloned().unwrap_or_default();
            let Some(s) = self.shape(starts) else {
                return false;
            };
            let elem = match self.session.type_of(self.gi, starts) {
                Some(Type::Tensor(e)) => *e,
                _ => crate::model::DataType::Int64 as i32,
            };
            let [Some(k)] = s[..] else {
                return false;
            };
            let Some(k) = usize::try_from(k).ok().filter(|&k| k <= rank) else {
                return false;
            };
            let new_axes: Vec<i64> = perm[..k].to_vec();
            let c = self.add_initializer(Tensor::ints(elem, vec![k as i64], new_axes));
            self.set_input(node, 3, c);
        } else {
            let Some(axes) = self.constant_ints(axes_name) else {
                return false;
            };
            let elem = self
                .session
                .initializer(self.gi, axes_name)
                .map_or(crate::model::DataType::Int64 as i32, |i| i.elem);
            let Some(axes) = normalize_axes(&axes, rank) else {
                return false;
            };
            let new_axes: Vec<i64> = axes.iter().map(|&a| perm[a as usize]).collect();
            let c = self.add_initializer(Tensor::ints(elem, vec![new_axes.len() as i64], new_axes));
            self.set_input(node, 3, c);
            if !self.has_consumers(axes_name) {
                self.remove_initializer(axes_name);
            }
        }
        self.transpose_inputs(node, inv, &[0]);
        self.transpose_outputs(node, perm);
        true
    }
}
