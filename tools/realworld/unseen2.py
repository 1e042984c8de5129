#!/usr/bin/env python3
"""The second unseen corpus (tests/fixtures/realworld/unseen2/, issue 16): kinds of models the
project had never been measured on, made the way users make them, small and seeded.

  # 1. torch exports: torch.onnx.export(dynamo=True) (onnxscript graphs) of small HF configs, and
  #    TorchScript exports that ORT's transformer optimizer then fuses (clip, bart, swin).
  #    venv: tools/realworld/unseen2-requirements-torch.txt
  python tools/realworld/unseen2.py torch tests/fixtures/realworld/unseen2 target/unseen2
  # 2. derived models (4-bit MatMulNBits, 16-bit QDQ, onnxslim, version_converter, fp16 with an
  #    op_block_list, ORT's optimizer), scikit-learn models (skl2onnx) and models shipped inside
  #    PyPI wheels (weights zeroed: structure, types and shapes kept).
  #    venv: tools/realworld/unseen2-requirements.txt
  pip download --no-deps -d target/unseen2/wheels silero-vad==6.2.3 magika==1.0.3 \
      rapidocr-onnxruntime==1.4.4 nudenet==3.4.2
  python tools/realworld/unseen2.py derive tests/fixtures/realworld/unseen2 target/unseen2 \
      /work/tsdecoders
  # 3. truth: SET=unseen2 tools/realworld/record.sh 1.23.2 1.24.4 1.31.1 and cpu_truth.py

File names say how a model was made:
  dyn.*      torch.onnx.export(dynamo=True), default opset: llama and qwen2 decoders with KV-cache
             inputs, a BERT encoder, a ViT, a whisper encoder-decoder (no cache), a ResNet
  nbits*.*   onnxruntime.quantization.matmul_nbits_quantizer.MatMulNBitsQuantizer (4 bits):
             nbits32a (block 32, asymmetric, accuracy_level 4), nbits128s (block 128, symmetric),
             nbits64a (block 64, asymmetric)
  qdq16u.* / qdq16s.*   quantize_static QDQ with QUInt16 / QInt16 activations (the latter with
             ActivationSymmetric), qdqsub.* QDQ of an op_types_to_quantize subset
  slim.*     onnxslim; vc<N>.* onnx.version_converter to opset N; fp16blk.*
             onnxconverter_common.float16 with an op_block_list
  ortopt*.*  onnxruntime.transformers.optimizer.optimize_model (clip, bart, swin; -fp16: float16)
  skl.*      skl2onnx (ai.onnx.ml: TreeEnsemble*, LinearClassifier, ZipMap, Scaler, OneHotEncoder,
             SVM, Normalizer)
  whl.*      models shipped in PyPI wheels (silero-vad 6.2.3 (MIT), magika 1.0.3 (Apache-2.0),
             rapidocr-onnxruntime 1.4.4 (Apache-2.0), nudenet 3.4.2 (AGPL-3.0 code, model from its
             wheel)), floating-point tensors of 256 or more elements zeroed
"""
import os
import sys


def _save(model, path):
    import onnx

    onnx.save_model(model, path, save_as_external_data=False)
    print("wrote", path, os.path.getsize(path))


def _single_file(tmp, out):
    import onnx

    m = onnx.load(tmp, load_external_data=True)
    _save(m, out)


def torch_models(out, scratch):
    import torch
    import transformers as tf

    os.makedirs(out, exist_ok=True)
    os.makedirs(scratch, exist_ok=True)
    torch.manual_seed(0)
    D = torch.export.Dim

    def dyn(name, module, args, names, outs, shapes, keep=True):
        tmp = os.path.join(scratch, name + ".tmp.onnx")
        torch.onnx.export(module.eval(), args, tmp, dynamo=True, dynamic_shapes=shapes, input_names=names,
                          output_names=outs)
        dst = os.path.join(out if keep else scratch, name + ".onnx")
        _single_file(tmp, dst)
        # the base model is also kept in the scratch folder for `derive`
        if keep:
            _single_file(tmp, os.path.join(scratch, name + ".onnx"))

    def ts(name, module, args, names, outs, axes):
        dst = os.path.join(scratch, name + ".onnx")
        torch.onnx.export(module.eval(), args, dst, dynamo=False, opset_version=17, input_names=names,
                          output_names=outs, dynamic_axes=axes)
        print("wrote", dst)

    # decoders with KV-cache inputs (a DynamicCache built from the past tensors)
    for arch, cfg in [
        ("llama", tf.LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)),
        ("qwen2", tf.Qwen2Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)),
    ]:
        torch.manual_seed(0)
        lm = tf.AutoModelForCausalLM.from_config(cfg).eval()

        class KV(torch.nn.Module):
            def __init__(self, m, cfg):
                super().__init__()
                self.m, self.cfg = m, cfg

            def forward(self, input_ids, attention_mask, pk0, pv0, pk1, pv1):
                c = tf.DynamicCache(config=self.cfg)
                c.update(pk0, pv0, 0)
                c.update(pk1, pv1, 1)
                o = self.m(input_ids=input_ids, attention_mask=attention_mask, past_key_values=c, use_cache=True)
                kv = []
                for layer in range(2):
                    kv += [o.past_key_values.layers[layer].keys, o.past_key_values.layers[layer].values]
                return (o.logits, *kv)

        b, s, p, t = D("batch"), D("seq"), D("past"), D("total")
        head = cfg.hidden_size // cfg.num_attention_heads
        args = (torch.randint(0, 256, (1, 3)), torch.ones(1, 8, dtype=torch.long),
                *[torch.randn(1, 2, 5, head) for _ in range(4)])
        shapes = {"input_ids": {0: b, 1: s}, "attention_mask": {0: b, 1: t},
                  **{k: {0: b, 2: p} for k in ["pk0", "pv0", "pk1", "pv1"]}}
        names = ["input_ids", "attention_mask", "past_key.0", "past_value.0", "past_key.1", "past_value.1"]
        outs = ["logits", "present_key.0", "present_value.0", "present_key.1", "present_value.1"]
        dyn(f"dyn.{arch}.kv", KV(lm, cfg), args, names, outs, shapes)

    # an encoder
    torch.manual_seed(0)
    bert = tf.BertModel(tf.BertConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                      intermediate_size=128, max_position_embeddings=128)).eval()
    b, s = D("batch"), D("seq")
    ids = torch.randint(0, 256, (2, 7))
    dyn("dyn.bert", bert, (ids, torch.ones_like(ids), torch.zeros_like(ids)),
        ["input_ids", "attention_mask", "token_type_ids"], ["last_hidden_state", "pooler_output"],
        ({0: b, 1: s}, {0: b, 1: s}, {0: b, 1: s}))

    # a ViT and a ResNet (HF)
    torch.manual_seed(0)
    vit = tf.ViTForImageClassification(tf.ViTConfig(image_size=32, patch_size=8, hidden_size=64, num_hidden_layers=2,
                                                    num_attention_heads=4, intermediate_size=128,
                                                    num_labels=10)).eval()
    dyn("dyn.vit", vit, (torch.randn(2, 3, 32, 32),), ["pixel_values"], ["logits"], ({0: D("batch")},))
    torch.manual_seed(0)
    rn = tf.ResNetForImageClassification(tf.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1],
                                                         layer_type="bottleneck", num_labels=10)).eval()
    dyn("dyn.resnet", rn, (torch.randn(2, 3, 64, 64),), ["pixel_values"], ["logits"], ({0: D("batch")},))

    # whisper encoder-decoder, no cache
    torch.manual_seed(0)
    wcfg = tf.WhisperConfig(vocab_size=256, num_mel_bins=16, encoder_layers=1, decoder_layers=1, d_model=64,
                            encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                            decoder_ffn_dim=128, max_source_positions=32, max_target_positions=32,
                            decoder_start_token_id=1, pad_token_id=0)
    wh = tf.WhisperForConditionalGeneration(wcfg).eval()

    class Whisper(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_features, decoder_input_ids):
            return self.m(input_features=input_features, decoder_input_ids=decoder_input_ids, use_cache=False).logits

    dyn("dyn.whisper", Whisper(wh), (torch.randn(1, 16, 64), torch.randint(0, 256, (1, 4))),
        ["input_features", "decoder_input_ids"], ["logits"], ({0: D("batch")}, {0: D("batch"), 1: D("dec")}))

    # TorchScript exports for ORT's transformer optimizer (model types not used before)
    torch.manual_seed(0)
    clip = tf.CLIPTextModel(tf.CLIPTextConfig(vocab_size=256, hidden_size=64, intermediate_size=128,
                                              num_hidden_layers=2, num_attention_heads=4,
                                              max_position_embeddings=32)).eval()
    ids = torch.randint(0, 256, (2, 16))
    ts("ts.clip", clip, (ids, torch.ones_like(ids)), ["input_ids", "attention_mask"],
       ["last_hidden_state", "pooler_output"], {"input_ids": {0: "batch", 1: "seq"},
                                                 "attention_mask": {0: "batch", 1: "seq"}})
    torch.manual_seed(0)
    bart = tf.BartModel(tf.BartConfig(vocab_size=256, d_model=64, encoder_layers=1, decoder_layers=1,
                                      encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                                      decoder_ffn_dim=128, max_position_embeddings=64)).eval()

    class Bart(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask):
            return self.m.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    ts("ts.bart-enc", Bart(bart), (ids, torch.ones_like(ids)), ["input_ids", "attention_mask"],
       ["last_hidden_state"], {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}})
    torch.manual_seed(0)
    swin = tf.SwinModel(tf.SwinConfig(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 4],
                                      window_size=4)).eval()

    class Swin(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, pixel_values):
            return self.m(pixel_values=pixel_values).pooler_output

    ts("ts.swin", Swin(swin), (torch.randn(1, 3, 32, 32),), ["pixel_values"], ["pooler_output"],
       {"pixel_values": {0: "batch"}})


def _zero_big_floats(m, limit=256):
    """Zero every floating-point tensor of `limit` or more elements (initializers and Constant
    nodes, subgraphs included): the structure, types and shapes stay, the file compresses."""
    import numpy as np
    from onnx import numpy_helper, TensorProto

    floats = {TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.BFLOAT16}

    def fix(t):
        if t.data_type not in floats:
            return
        n = int(np.prod(t.dims)) if len(t.dims) else 1
        if n < limit:
            return
        a = numpy_helper.to_array(t)
        z = numpy_helper.from_array(np.zeros_like(a), t.name)
        t.CopyFrom(z)

    def walk(g):
        for t in g.initializer:
            fix(t)
        for n in g.node:
            for a in n.attribute:
                if a.HasField("t"):
                    fix(a.t)
                if a.HasField("g"):
                    walk(a.g)
                for sg in a.graphs:
                    walk(sg)

    walk(m.graph)
    return m


def derive(out, scratch, tsdir):
    import glob
    import zipfile

    import numpy as np
    import onnx

    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(0)

    # 4-bit weights (MatMulNBits)
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    def nbits(src, dst, **kw):
        q = MatMulNBitsQuantizer(onnx.load(src), **kw)
        q.process()
        _save(q.model.model, os.path.join(out, dst))

    nbits(os.path.join(scratch, "dyn.llama.kv.onnx"), "nbits32a.dyn.llama.kv.onnx", block_size=32,
          is_symmetric=False, accuracy_level=4)
    nbits(os.path.join(scratch, "dyn.qwen2.kv.onnx"), "nbits128s.dyn.qwen2.kv.onnx", block_size=128,
          is_symmetric=True)
    nbits(os.path.join(tsdir, "phi3.L2.ts.op17.onnx"), "nbits64a.tsd.phi3.L2.onnx", block_size=64,
          is_symmetric=False)

    # static QDQ with 16-bit activations, and of an op-type subset
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self, feeds):
            self.it = iter(feeds)

        def get_next(self):
            return next(self.it, None)

    def qdq(src, dst, feeds, **kw):
        quantize_static(src, os.path.join(out, dst), Reader(feeds), quant_format=QuantFormat.QDQ, **kw)
        print("wrote", dst)

    px = [{"pixel_values": rng.standard_normal((1, 3, 32, 32)).astype(np.float32)} for _ in range(2)]
    qdq(os.path.join(scratch, "dyn.vit.onnx"), "qdq16u.dyn.vit.onnx", px, activation_type=QuantType.QUInt16,
        weight_type=QuantType.QUInt8)
    px64 = [{"pixel_values": rng.standard_normal((1, 3, 64, 64)).astype(np.float32)} for _ in range(2)]
    qdq(os.path.join(scratch, "dyn.resnet.onnx"), "qdq16s.dyn.resnet.onnx", px64, activation_type=QuantType.QInt16,
        weight_type=QuantType.QInt8, per_channel=True, extra_options={"ActivationSymmetric": True})
    ids = rng.integers(0, 256, (1, 7)).astype(np.int64)
    tok = [{"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}]
    qdq(os.path.join(scratch, "dyn.bert.onnx"), "qdqsub.dyn.bert.onnx", tok, activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul", "Add", "Gather"])

    # onnxslim
    import onnxslim

    _save(onnxslim.slim(onnx.load(os.path.join(scratch, "dyn.whisper.onnx"))), os.path.join(out, "slim.dyn.whisper.onnx"))
    _save(onnxslim.slim(onnx.load(os.path.join(tsdir, "gpt2.L2.ts.op17.onnx"))), os.path.join(out, "slim.tsd.gpt2.L2.onnx"))

    # version_converter
    from onnx import version_converter

    _save(version_converter.convert_version(onnx.load(os.path.join(tsdir, "mistral.L2.ts.op17.onnx")), 21),
          os.path.join(out, "vc21.tsd.mistral.L2.onnx"))
    _save(version_converter.convert_version(onnx.load(os.path.join(scratch, "dyn.resnet.onnx")), 14),
          os.path.join(out, "vc14.dyn.resnet.onnx"))

    # fp16 with an op_block_list
    from onnxconverter_common import float16

    _save(float16.convert_float_to_float16(onnx.load(os.path.join(scratch, "dyn.bert.onnx")), keep_io_types=True,
                                           op_block_list=["Softmax", "LayerNormalization", "Pow", "ReduceMean"]),
          os.path.join(out, "fp16blk.dyn.bert.onnx"))

    # ORT's transformer optimizer, model types not used before
    from onnxruntime.transformers.optimizer import optimize_model

    for src, dst, kind, fp16, kw in [
        ("ts.clip.onnx", "ortopt.clip.onnx", "clip", False, {}),
        ("ts.clip.onnx", "ortopt-fp16.clip.onnx", "clip", True, {}),
        ("ts.bart-enc.onnx", "ortopt.bart-enc.onnx", "bart", False, {}),
        ("ts.swin.onnx", "ortopt-fp16.swin.onnx", "swin", True, {}),
    ]:
        m = optimize_model(os.path.join(scratch, src), model_type=kind, num_heads=4, hidden_size=64, use_gpu=True,
                           opt_level=0, **kw)
        if fp16:
            m.convert_float_to_float16(keep_io_types=True)
        _save(m.model, os.path.join(out, dst))

    # scikit-learn (skl2onnx)
    skl(out, rng)

    # models shipped inside PyPI wheels
    wanted = {
        "silero_vad/data/silero_vad.onnx": "whl.silero-vad.onnx",
        "silero_vad/data/silero_vad_half.onnx": "whl.silero-vad-half.onnx",
        "silero_vad/data/silero_vad_op18_ifless.onnx": "whl.silero-vad-op18-ifless.onnx",
        "silero_vad/data/silero_vad_16k_sequence.onnx": "whl.silero-vad-16k-seq.onnx",
        "magika/models/standard_v3_3/model.onnx": "whl.magika.onnx",
        "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx": "whl.rapidocr-cls.onnx",
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx": "whl.rapidocr-det.onnx",
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx": "whl.rapidocr-rec.onnx",
        "nudenet/320n.onnx": "whl.nudenet-320n.onnx",
    }
    for whl in sorted(glob.glob(os.path.join(scratch, "wheels", "*.whl"))):
        with zipfile.ZipFile(whl) as z:
            for member, dst in wanted.items():
                if member in z.namelist():
                    m = onnx.load_from_string(z.read(member))
                    _save(_zero_big_floats(m), os.path.join(out, dst))


def skl(out, rng):
    import numpy as np
    from skl2onnx import to_onnx
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import GradientBoostingRegressor, RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import Normalizer, OneHotEncoder, StandardScaler
    from sklearn.svm import SVC

    X = rng.standard_normal((60, 4)).astype(np.float32)
    y = (X[:, 0] + X[:, 1] > 0).astype(np.int64) + (X[:, 2] > 1).astype(np.int64)

    def save(model, dst, x, **kw):
        onx = to_onnx(model, x[:1], target_opset={"": 17, "ai.onnx.ml": 3}, **kw)
        _save(onx, os.path.join(out, dst))

    save(RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0).fit(X, y), "skl.rf-clf.onnx", X)
    save(make_pipeline(StandardScaler(), LogisticRegression()).fit(X, y), "skl.scaler-logreg.onnx", X,
         options={"zipmap": False})
    save(GradientBoostingRegressor(n_estimators=3, max_depth=2, random_state=0).fit(X, X[:, 3]), "skl.gbr.onnx", X)
    save(make_pipeline(Normalizer(), SVC(probability=True, random_state=0)).fit(X, y), "skl.norm-svc.onnx", X)
    # numeric and categorical columns: Scaler, OneHotEncoder, Concat, a linear classifier
    cat = rng.integers(0, 3, (60, 1)).astype(np.int64)
    Xm = np.concatenate([X, cat.astype(np.float32)], axis=1)
    ct = ColumnTransformer([("num", StandardScaler(), [0, 1, 2, 3]), ("cat", OneHotEncoder(), [4])])
    save(make_pipeline(ct, LogisticRegression()).fit(Xm, y), "skl.columns-logreg.onnx", Xm)


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "torch":
        torch_models(sys.argv[2], sys.argv[3])
    elif len(sys.argv) >= 5 and sys.argv[1] == "derive":
        derive(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(__doc__)
