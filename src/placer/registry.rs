//! ORT's graph transformers as data: every transformer and rewrite rule that
//! `onnxruntime/core/optimizer/graph_transformer_utils.cc` registers (`GenerateRewriteRules`,
//! `GenerateTransformers`) for the levels this tool simulates, in the order ORT applies them,
//! with the providers each is compatible with, and where it is simulated — or why it is not.
//!
//! The drivers read their order from here: `optimize::run` (level 1, before partitioning) and
//! `fusions::run` (level 2, after it). A transformer's own release checks (behaviour that
//! changed between releases) stay in its file, next to the code they change.

use crate::placer::OptLevel;
use crate::providers::{EpSet, ort};
use crate::tables::KernelTable;

/// Whether ORT registers it as a rewrite rule (of the level's `RuleBasedGraphTransformer`) or
/// as a graph transformer of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    RewriteRule,
    Transformer,
    /// A transformer the session script (`placer/mod.rs`) runs itself at ORT's fixed point,
    /// outside the level drivers (once, not repeated with the level's other transformers).
    Standalone,
}

/// Where a transformer is simulated, or why it is not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// The file under `src/` that simulates it.
    Simulated(&'static str),
    /// Why the simulation leaves it out.
    NotSimulated(&'static str),
}

/// One transformer ORT registers.
#[derive(Debug, Clone, Copy)]
pub struct Transformer {
    /// ORT's class name (what `Name()` returns, and what its log says).
    pub name: &'static str,
    /// ORT's source file under `onnxruntime/core/optimizer/`.
    pub ort_file: &'static str,
    /// The level that registers it (`Basic` = ORT's Level1, `Extended` = Level2, `All` = Level3).
    pub level: OptLevel,
    pub kind: Kind,
    /// The providers whose nodes it may change, as ORT states them (ORT's names; empty: any,
    /// as level 1 is not filtered by provider).
    pub providers: &'static [&'static str],
    /// Providers ORT added to the set in a later release: (major, minor, name).
    pub added: &'static [(u64, u64, &'static str)],
    pub status: Status,
}

// The compatible-provider sets, as `GenerateTransformers` names and states them (ORT's
// provider names, also of providers the tool does not simulate: a provider added to the tool
// gets the transformers whose sets name it, with no change here or in the transformers).
const ANY: &[&str] = &[];
const CPU_EP: &[&str] = &[ort::CPU];
const CPU_ACL_EPS: &[&str] = &[ort::CPU, ort::ACL];
const CPU_DML_ACL_EPS: &[&str] = &[ort::CPU, ort::DML, ort::ACL];
const CPU_ROCM_ACL_ARMNN_JS_WEBGPU_EPS: &[&str] = &[
    ort::CPU,
    ort::ROCM,
    ort::ACL,
    ort::ARMNN,
    ort::JS,
    ort::WEBGPU,
];
const CPU_CUDA_ROCM_EPS: &[&str] = &[ort::CPU, ort::CUDA, ort::ROCM];
const CPU_CUDA_DML_ROCM_EPS: &[&str] = &[ort::CPU, ort::CUDA, ort::DML, ort::ROCM];
const CPU_ACL_CUDA_DML_ROCM_EPS: &[&str] = &[ort::CPU, ort::ACL, ort::CUDA, ort::DML, ort::ROCM];
const CUDA_EPS: &[&str] = &[ort::CUDA];
const CUDA_ROCM_EPS: &[&str] = &[ort::CUDA, ort::ROCM];
const DML_EP: &[&str] = &[ort::DML];

const fn t(
    name: &'static str,
    ort_file: &'static str,
    level: OptLevel,
    kind: Kind,
    providers: &'static [&'static str],
    status: Status,
) -> Transformer {
    Transformer {
        name,
        ort_file,
        level,
        kind,
        providers,
        added: &[],
        status,
    }
}

impl Transformer {
    /// The simulated providers whose nodes it changes at `table`'s release.
    pub fn compatible(&self, table: &KernelTable) -> EpSet {
        if self.providers.is_empty() {
            return EpSet::ANY;
        }
        let mut names: Vec<&str> = self.providers.to_vec();
        names.extend(
            self.added
                .iter()
                .filter(|(major, minor, _)| table.release_at_least(*major, *minor))
                .map(|(_, _, name)| *name),
        );
        EpSet::of_names(&names)
    }
}

use Kind::{RewriteRule as R, Standalone as S, Transformer as T};
use OptLevel::{All as L3, Basic as L1, Extended as L2};
use Status::{NotSimulated as No, Simulated as Sim};

const RULES: &str = "placer/optimize/rule_based_graph_transformer.rs";
const QDQ: &str = "not simulated yet: of the QDQ pipeline only EnsureUniqueDQForNodeUnit, DoubleQDQPairsRemover, QDQPropagationTransformer, WhereDummyDq, QDQS8ToU8Transformer, QDQSelectorActionTransformer and QDQFinalCleanupTransformer are";

/// Every transformer, level by level, in ORT's order (1.23–1.31 and main).
pub static REGISTRY: &[Transformer] = &[
    // Level 1: the rewrite rules, in `GenerateRewriteRules` order, run by the level's
    // RuleBasedGraphTransformer node by node.
    t(
        "EliminateIdentity",
        "identity_elimination.cc",
        L1,
        R,
        ANY,
        Sim(RULES),
    ),
    t(
        "EliminateSlice",
        "slice_elimination.cc",
        L1,
        R,
        ANY,
        Sim(RULES),
    ),
    t(
        "UnsqueezeElimination",
        "unsqueeze_elimination.cc",
        L1,
        R,
        ANY,
        Sim(RULES),
    ),
    t(
        "EliminateDropout",
        "dropout_elimination.cc",
        L1,
        R,
        ANY,
        Sim(RULES),
    ),
    t(
        "ExpandElimination",
        "expand_elimination.cc",
        L1,
        R,
        ANY,
        Sim(RULES),
    ),
    t(
        "CastElimination",
        "cast_elimination.cc",
        L1,
        R,
        ANY,
        Sim(RULES),
    ),
    t(
        "CastChainElimination",
        "cast_chain_elimination.cc",
        L1,
        R,
        ANY,
        No("off unless the session option `session.enable_cast_chain_elimination` is set"),
    ),
    t(
        "PreShapeNodeElimination",
        "pre_shape_node_elimination.cc",
        L1,
        R,
        ANY,
        Sim(RULES),
    ),
    t(
        "NoopElimination",
        "noop_elimination.cc",
        L1,
        R,
        ANY,
        Sim("placer/optimize/noop_elimination.rs"),
    ),
    t(
        "DivMulFusion",
        "div_mul_fusion.cc",
        L1,
        R,
        ANY,
        Sim("placer/optimize/div_mul_fusion.rs"),
    ),
    t(
        "FuseReluClip",
        "relu_clip_fusion.cc",
        L1,
        R,
        ANY,
        Sim("placer/optimize/relu_clip_fusion.rs"),
    ),
    t(
        "GemmSumFusion",
        "gemm_sum_fusion.cc",
        L1,
        R,
        ANY,
        Sim("placer/optimize/gemm_sum_fusion.rs"),
    ),
    t(
        "GemmTransposeFusion",
        "gemm_transpose_fusion.cc",
        L1,
        R,
        ANY,
        Sim("placer/optimize/gemm_transpose_fusion.rs"),
    ),
    t(
        "NotWhereFusion",
        "not_where_fusion.cc",
        L1,
        R,
        ANY,
        Sim(RULES),
    ),
    t(
        "ConvAddFusion",
        "conv_add_fusion.cc",
        L1,
        R,
        ANY,
        Sim("placer/optimize/conv_add_fusion.rs"),
    ),
    t(
        "ConvMulFusion",
        "conv_mul_fusion.cc",
        L1,
        R,
        ANY,
        Sim("placer/optimize/conv_add_fusion.rs"),
    ),
    t(
        "ConvBNFusion",
        "conv_bn_fusion.cc",
        L1,
        R,
        ANY,
        Sim("placer/optimize/conv_add_fusion.rs"),
    ),
    t(
        "PadFusion",
        "pad_fusion.cc",
        L1,
        R,
        ANY,
        Sim("placer/optimize/pad_fusion.rs"),
    ),
    t(
        "MatmulBNFusion",
        "matmul_bn_fusion.cc",
        L1,
        R,
        ANY,
        No(
            "MatMul + BatchNormalization exports are rare; the fused Gemm would sit where the MatMul sat",
        ),
    ),
    t(
        "LabelEncoderFusion",
        "label_encoder_fusion.cc",
        L1,
        R,
        ANY,
        No("ai.onnx.ml LabelEncoder chains run on the CPU either way"),
    ),
    // Level 1: the transformers, in `GenerateTransformers` order.
    t(
        "Level1_RuleBasedTransformer",
        "rule_based_graph_transformer.cc",
        L1,
        T,
        ANY,
        Sim(RULES),
    ),
    t(
        "DoubleQDQPairsRemover",
        "double_qdq_pairs_remover.cc",
        L1,
        T,
        ANY,
        Sim("placer/qdq_transformer/double_qdq_pairs_remover.rs"),
    ),
    t(
        "ConstantSharing",
        "constant_sharing.cc",
        L1,
        T,
        ANY,
        Sim("placer/optimize/constant_sharing.rs"),
    ),
    t(
        "CommonSubexpressionElimination",
        "common_subexpression_elimination.cc",
        L1,
        T,
        ANY,
        Sim("placer/optimize/common_subexpression_elimination.rs"),
    ),
    t(
        "ConstantFolding",
        "constant_folding.cc",
        L1,
        T,
        ANY,
        Sim("placer/optimize/constant_folding.rs"),
    ),
    t(
        "MatMulAddFusion",
        "matmul_add_fusion.cc",
        L1,
        T,
        ANY,
        Sim("placer/optimize/matmul_add_fusion.rs"),
    ),
    t(
        "ReshapeFusion",
        "reshape_fusion.cc",
        L1,
        T,
        ANY,
        Sim("placer/optimize/reshape_fusion.rs"),
    ),
    t(
        "FreeDimensionOverrideTransformer",
        "free_dim_override_transformer.cc",
        L1,
        T,
        ANY,
        No("needs session options (`free_dimension_overrides`) the tool does not take"),
    ),
    t(
        "GeluFusion",
        "gelu_fusion.cc",
        L1,
        T,
        ANY,
        No(
            "registered at level 1 from ORT main on; simulated at level 2, where the fused node lands on the same provider",
        ),
    ),
    t(
        "LayerNormFusion",
        "layer_norm_fusion.cc",
        L1,
        T,
        ANY,
        No(
            "registered at level 1 from ORT main on; simulated at level 2, where the fused node lands on the same provider",
        ),
    ),
    t(
        "QDQPropagationTransformer",
        "qdq_transformer/qdq_propagation.cc",
        L1,
        T,
        ANY,
        Sim("placer/qdq_transformer/qdq_propagation.rs"),
    ),
    t(
        "WeightBiasQuantization",
        "qdq_transformer/weight_bias_quantization.cc",
        L1,
        T,
        ANY,
        No(QDQ),
    ),
    t(
        "EnsureUniqueDQForNodeUnit",
        "qdq_transformer/ensure_unique_dq_for_node_unit.cc",
        L1,
        T,
        ANY,
        Sim("placer/ensure_unique_dq_for_node_unit.rs"),
    ),
    t(
        "WhereDummyDq",
        "qdq_transformer/where_dummy_dq.cc",
        L1,
        T,
        ANY,
        Sim("placer/qdq_transformer/where_dummy_dq.rs"),
    ),
    t(
        "RocmBlasAltImpl",
        "rocm_blas_alt_impl.cc",
        L1,
        T,
        ANY,
        No("ROCm only"),
    ),
    t(
        "TransposeOptimizer",
        "transpose_optimizer.cc",
        L1,
        T,
        ANY,
        Sim("placer/transpose/mod.rs"),
    ),
    // Level 2, after partitioning: each changes only nodes of its providers.
    t(
        "Level2_RuleBasedTransformer",
        "rule_based_graph_transformer.cc",
        L2,
        S,
        CPU_EP,
        // Its one rule that finds anything left by level 1: `ReluQuantFusion` (CPU only; also
        // `ClipQuantFusion`, `GemmTransposeFusion` again, not simulated).
        Sim("placer/qdq_transformer/relu_quantizelinear.rs"),
    ),
    t(
        "TransposeOptimizer (CPU)",
        "transpose_optimizer.cc",
        L2,
        S,
        CPU_EP,
        Sim("placer/transpose/mod.rs"),
    ),
    t(
        "QDQS8ToU8Transformer",
        "qdq_transformer/qdq_s8_to_u8.cc",
        L2,
        S,
        CPU_EP,
        Sim("placer/qdq_transformer/qdq_s8_to_u8.rs"),
    ),
    t(
        "QDQSelectorActionTransformer",
        "qdq_transformer/selectors_actions/qdq_selector_action_transformer.cc",
        L2,
        S,
        // CUDA for its `DQMatMulToMatMulNBits` rule only.
        &[ort::CPU, ort::CUDA],
        Sim("placer/qdq_transformer/selectors_actions/qdq_selector_action_transformer.rs"),
    ),
    t(
        "GemmActivationFusion",
        "gemm_activation_fusion.cc",
        L2,
        T,
        CPU_EP,
        Sim("placer/fusions/gemm_activation_fusion.rs"),
    ),
    t(
        "MatMulIntegerToFloatFusion",
        "matmul_integer_to_float.cc",
        L2,
        S,
        CPU_DML_ACL_EPS,
        Sim("placer/matmul_integer_to_float.rs"),
    ),
    t(
        "DynamicQuantizeMatMulFusion",
        "dynamic_quantize_matmul_fusion.cc",
        L2,
        S,
        CPU_ACL_EPS,
        Sim("placer/matmul_integer_to_float.rs"),
    ),
    t(
        "ConvActivationFusion",
        "conv_activation_fusion.cc",
        L2,
        T,
        CPU_ROCM_ACL_ARMNN_JS_WEBGPU_EPS,
        Sim("placer/fusions/conv_activation_fusion.rs"),
    ),
    t(
        "GeluFusion",
        "gelu_fusion.cc",
        L2,
        T,
        CPU_ACL_CUDA_DML_ROCM_EPS,
        Sim("placer/fusions/gelu_fusion.rs"),
    ),
    t(
        "LayerNormFusion",
        "layer_norm_fusion.cc",
        L2,
        T,
        CPU_ACL_CUDA_DML_ROCM_EPS,
        Sim("placer/fusions/layer_norm_fusion.rs"),
    ),
    t(
        "SimplifiedLayerNormFusion",
        "layer_norm_fusion.cc",
        L2,
        T,
        CPU_CUDA_ROCM_EPS,
        Sim("placer/fusions/layer_norm_fusion.rs"),
    ),
    t(
        "AttentionFusion",
        "attention_fusion.cc",
        L2,
        T,
        CPU_ACL_CUDA_DML_ROCM_EPS,
        No("its patterns need the mask sub-graphs of ORT's own BERT exports; no probe triggers it"),
    ),
    t(
        "EmbedLayerNormFusion",
        "embed_layer_norm_fusion.cc",
        L2,
        T,
        CPU_ACL_CUDA_DML_ROCM_EPS,
        No(
            "its patterns need the embedding sub-graphs of ORT's own BERT exports; no probe triggers it",
        ),
    ),
    t(
        "GatherSliceToSplitFusion",
        "gather_fusion.cc",
        L2,
        T,
        CPU_CUDA_ROCM_EPS,
        Sim("placer/fusions/gather_fusion.rs"),
    ),
    t(
        "GatherToSliceFusion",
        "gather_fusion.cc",
        L2,
        T,
        CPU_CUDA_ROCM_EPS,
        Sim("placer/fusions/gather_fusion.rs"),
    ),
    t(
        "MatmulTransposeFusion",
        "matmul_transpose_fusion.cc",
        L2,
        T,
        CPU_CUDA_DML_ROCM_EPS,
        Sim("placer/fusions/matmul_transpose_fusion.rs"),
    ),
    t(
        "BiasGeluFusion",
        "bias_gelu_fusion.cc",
        L2,
        T,
        CPU_ACL_CUDA_DML_ROCM_EPS,
        Sim("placer/fusions/bias_gelu_fusion.rs"),
    ),
    t(
        "GroupQueryAttentionFusion",
        "group_query_attention_fusion.cc",
        L2,
        T,
        CUDA_EPS,
        No("matches ORT-exported GQA sub-graphs only"),
    ),
    t(
        "SkipLayerNormFusion",
        "skip_layer_norm_fusion.cc",
        L2,
        T,
        CPU_ACL_CUDA_DML_ROCM_EPS,
        Sim("placer/fusions/skip_layer_norm_fusion.rs"),
    ),
    t(
        "FastGeluFusion",
        "fast_gelu_fusion.cc",
        L2,
        T,
        CPU_CUDA_DML_ROCM_EPS,
        Sim("placer/fusions/fast_gelu_fusion.rs"),
    ),
    t(
        "QuickGeluFusion",
        "quick_gelu_fusion.cc",
        L2,
        T,
        CPU_ACL_CUDA_DML_ROCM_EPS,
        Sim("placer/fusions/quick_gelu_fusion.rs"),
    ),
    t(
        "GeluApproximation",
        "gelu_approximation.cc",
        L2,
        T,
        CPU_CUDA_ROCM_EPS,
        No("off unless the session option `optimization.enable_gelu_approximation` is set"),
    ),
    t(
        "BiasSoftmaxFusion",
        "bias_softmax_fusion.cc",
        L2,
        T,
        CPU_CUDA_ROCM_EPS,
        Sim("placer/fusions/bias_softmax_fusion.rs"),
    ),
    t(
        "BiasDropoutFusion",
        "bias_dropout_fusion.cc",
        L2,
        T,
        CUDA_ROCM_EPS,
        No("fuses training-mode Dropout only"),
    ),
    t(
        "MatMulScaleFusion",
        "matmul_scale_fusion.cc",
        L2,
        T,
        CPU_ACL_CUDA_DML_ROCM_EPS,
        Sim("placer/fusions/matmul_scale_fusion.rs"),
    ),
    t(
        "MatMulActivationFusion",
        "matmul_activation_fusion.cc",
        L2,
        T,
        DML_EP,
        No("DirectML only"),
    ),
    t(
        "Avx2WeightS8ToU8Transformer",
        "qdq_transformer/avx2_weight_s8_to_u8.cc",
        L2,
        T,
        CPU_EP,
        No(QDQ),
    ),
    Transformer {
        // CUDA from ORT 1.28 (measured: `fusions/matmul_nbits_fusion.rs`).
        added: &[(1, 28, ort::CUDA)],
        ..t(
            "MatMulNBitsFusion",
            "matmul_nbits_fusion.cc",
            L2,
            T,
            CPU_EP,
            Sim("placer/fusions/matmul_nbits_fusion.rs"),
        )
    },
    t(
        "QDQFinalCleanupTransformer",
        "qdq_transformer/qdq_final_cleanup.cc",
        L2,
        S,
        ANY,
        Sim("placer/qdq_transformer/qdq_final_cleanup.rs"),
    ),
    // Level 3: CPU layout transformers.
    t(
        "NchwcTransformer",
        "nchwc_transformer.cc",
        L3,
        S,
        CPU_EP,
        Sim("placer/nchwc_transformer.rs"),
    ),
    t(
        "NhwcTransformer",
        "nhwc_transformer.cc",
        L3,
        S,
        CPU_EP,
        Sim("placer/nhwc_transformer.rs"),
    ),
    t(
        "ConvAddActivationFusion",
        "conv_add_act_fusion.cc",
        L3,
        T,
        CPU_EP,
        No("CPU only: never moves a node"),
    ),
    // ORT's Level4, after InsertCastTransformer (the session script runs it, then the level-2
    // and level-3 transformers again when it changed the graph).
    t(
        "FuseInitializersTransformer",
        "fuse_initializers_transformer.cc",
        L3,
        S,
        CPU_EP,
        Sim("placer/fuse_initializers_transformer.rs"),
    ),
];

/// The transformers (not the rewrite rules) of `level` that are simulated, in ORT's order.
pub fn simulated(level: OptLevel) -> impl Iterator<Item = &'static Transformer> {
    REGISTRY.iter().filter(move |t| {
        t.level == level && t.kind == Kind::Transformer && matches!(t.status, Status::Simulated(_))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every simulated transformer names a file that exists, and every ORT file it cites is a
    /// transformer file name.
    #[test]
    fn simulated_files_exist() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        for t in REGISTRY {
            if let Status::Simulated(file) = t.status {
                assert!(src.join(file).is_file(), "{}: {file} is not a file", t.name);
            }
            assert!(t.ort_file.ends_with(".cc"), "{}", t.name);
        }
    }

    #[test]
    fn one_entry_per_name_and_level() {
        let mut seen = std::collections::HashSet::new();
        for t in REGISTRY {
            assert!(
                seen.insert((t.name, t.level as u8)),
                "{} listed twice",
                t.name
            );
        }
    }
}
