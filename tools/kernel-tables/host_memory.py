"""Which CUDA kernel arguments live in host memory (OrtMemTypeCPUInput / OrtMemTypeCPUOutput).

ORT does not report these through its Python API, so they come from ORT's sources, as summarised in
../shared/docs/ort-placement.md section 6 (read from ORT at ~1.19 and at ~1.25-dev), plus a few contrib
kernels read from single stored source files. Each rule applies to every CUDA registration of the op
whose `since` lies in [lo, hi] (hi None = no upper bound). `probe.py` confirms them per release.

Source keys (recorded in each table's [memory] section):
  doc            ort-placement.md section 6 (ORT sources ~1.19 "OLD" and ~1.25-dev "NEW")
  src-beam       onnxruntime/contrib_ops/cuda/transformers/beam_search.cc (stored copy @03c63af3)
  src-greedy     onnxruntime/contrib_ops/cuda/transformers/greedy_search.cc (stored copy @03fdb0c0)
  src-sampling   onnxruntime/contrib_ops/cuda/transformers/sampling.cc (stored copy @2ebdd2b2)
"""

SOURCES = {
    "doc": "docs/ort-placement.md section 6: ORT sources at ~1.19 and ~1.25-dev (grep of OrtMemTypeCPU"
                     " in core/providers/cuda and contrib_ops/cuda)",
    "src-beam": "microsoft/onnxruntime@03c63af3:onnxruntime/contrib_ops/cuda/transformers/beam_search.cc",
    "src-greedy": "microsoft/onnxruntime@03fdb0c0:onnxruntime/contrib_ops/cuda/transformers/greedy_search.cc",
    "src-sampling": "microsoft/onnxruntime@2ebdd2b2:onnxruntime/contrib_ops/cuda/transformers/sampling.cc",
}

ONNX, MS = "ai.onnx", "com.microsoft"
REDUCE18 = ["ReduceMax", "ReduceMin", "ReduceMean", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
            "ReduceLogSumExp", "ReduceSumSquare"]

# (domain, op, lo, hi, cpu_inputs, cpu_outputs, source)
RULES = [
    (ONNX, "MemcpyFromHost", 1, None, [0], [], "doc"),
    (ONNX, "MemcpyToHost", 1, None, [], [0], "doc"),
    (ONNX, "Shape", 1, None, [], [0], "doc"),
    (ONNX, "Size", 1, None, [], [0], "doc"),
    (ONNX, "SequenceLength", 11, None, [], [0], "doc"),
    (ONNX, "SequenceAt", 11, None, [1], [], "doc"),
    (ONNX, "SequenceErase", 11, None, [1], [], "doc"),
    (ONNX, "SequenceInsert", 11, None, [2], [], "doc"),
    (ONNX, "Reshape", 5, None, [1], [], "doc"),
    (ONNX, "Expand", 8, None, [1], [], "doc"),
    (ONNX, "Squeeze", 13, None, [1], [], "doc"),
    (ONNX, "Unsqueeze", 13, None, [1], [], "doc"),
    (ONNX, "Slice", 10, None, [1, 2, 3, 4], [], "doc"),
    (ONNX, "Split", 13, None, [1], [], "doc"),
    (ONNX, "Tile", 6, None, [1], [], "doc"),
    (ONNX, "Pad", 11, 17, [1, 2], [], "doc"),
    (ONNX, "Pad", 18, None, [1, 2, 3], [], "doc"),
    (ONNX, "Resize", 10, 10, [1], [], "doc"),
    (ONNX, "Resize", 11, None, [1, 2, 3], [], "doc"),
    (ONNX, "Upsample", 7, 9, [1], [], "doc"),
    (ONNX, "ConstantOfShape", 9, None, [0], [], "doc"),
    (ONNX, "Range", 11, None, [0, 1, 2], [], "doc"),
    (ONNX, "TopK", 10, None, [1], [], "doc"),
    (ONNX, "CumSum", 11, None, [1], [], "doc"),
    (ONNX, "OneHot", 11, None, [1, 2], [], "doc"),
    (ONNX, "Trilu", 14, None, [1], [], "doc"),
    (MS, "Trilu", 1, None, [1], [], "doc"),
    (ONNX, "Dropout", 12, None, [1, 2], [], "doc"),
    (ONNX, "NonMaxSuppression", 10, None, [2, 3, 4], [], "doc"),
    (ONNX, "MatMulInteger", 10, None, [2, 3], [], "doc"),
    (ONNX, "ReduceSum", 13, None, [1], [], "doc"),
    *[(ONNX, op, 18, None, [1], [], "doc") for op in REDUCE18],
    (ONNX, "ArgMax", 13, None, [1], [], "doc"),
    (ONNX, "ArgMin", 13, None, [1], [], "doc"),
    (ONNX, "If", 1, None, [0], [], "doc"),
    (ONNX, "Loop", 1, None, [0, 1], [], "doc"),
    (ONNX, "Scan", 8, 8, [0], [], "doc"),
    (ONNX, "RNN", 7, None, [4], [], "doc"),
    (ONNX, "GRU", 7, None, [4], [], "doc"),
    (ONNX, "LSTM", 7, None, [4], [], "doc"),
    (MS, "Attention", 1, None, [6], [], "doc"),
    (MS, "MultiHeadAttention", 1, None, [8], [], "doc"),
    (MS, "GroupQueryAttention", 1, None, [6], [], "doc"),
    (MS, "SparseAttention", 1, None, [7], [], "doc"),
    (MS, "DecoderMaskedMultiHeadAttention", 1, None, [7, 8], [], "doc"),
    (MS, "DecoderMaskedSelfAttention", 1, None, [6, 7], [], "doc"),
    (MS, "RelativePositionBias", 1, None, [1, 2], [], "doc"),
    (MS, "RemovePadding", 1, None, [], [3], "doc"),
    (MS, "BiasDropout", 1, None, [3, 4], [], "doc"),
    (MS, "BitmaskBiasDropout", 1, None, [3, 4], [], "doc"),
    (MS, "BitmaskDropout", 1, None, [1, 2], [], "doc"),
    # ort-placement.md lists DynamicSlice under com.microsoft; ORT registers it in the ONNX domain.
    (ONNX, "DynamicSlice", 1, None, [1, 2, 3], [], "doc"),
    (MS, "ConvTransposeWithDynamicPads", 1, None, [2], [], "doc"),
    (MS, "BeamSearch", 1, None, [0, 1, 2, 3, 4, 5, 6, 7], [0, 1], "src-beam"),
    (MS, "GreedySearch", 1, None, [0, 1, 2, 3], [0], "src-greedy"),
    (MS, "Sampling", 1, None, [0, 1, 2, 3, 6], [0, 1], "src-sampling"),
]


def lookup(domain, op, since):
    """(cpu_inputs, cpu_outputs, source) for a CUDA registration, or None when nothing is declared."""
    for d, o, lo, hi, ins, outs, src in RULES:
        if d == domain and o == op and since >= lo and (hi is None or since <= hi):
            return list(ins), list(outs), src
    return None
