#!/usr/bin/env python3
"""The third unseen corpus (tests/fixtures/realworld/unseen3/, issue 16): kinds of models no
earlier set had, made the way users make them with public tools, small, seeded, and with every
floating-point tensor of 256 or more elements zeroed (structure, types and shapes kept).

  # 1. torch exports (torchvision detection/segmentation/classification, timm, transformers
  #    audio/seq2seq/detection/segmentation, a diffusers UNet, recurrent nets); the base models
  #    go to the scratch folder too, for `derive`.
  #    venv: tools/realworld/unseen3-requirements.txt
  python tools/realworld/unseen3.py torch tests/fixtures/realworld/unseen3 target/unseen3
  # 1b. Keras models through tf2onnx. venv: tools/realworld/unseen3-requirements-tf.txt
  python tools/realworld/unseen3.py tf tests/fixtures/realworld/unseen3
  # 2. derived models: onnxruntime.quantization modes no set used (quant_pre_process, QDQ
  #    extra_options, float8, per-channel QDQ of Relu/Clip convnets, dynamic LSTM, HQQ 4-bit,
  #    accuracy_level), ORT's transformer optimizer for `unet` (fp16 too), onnxsim,
  #    onnxoptimizer, onnxmltools' LightGBM converter.
  python tools/realworld/unseen3.py derive tests/fixtures/realworld/unseen3 target/unseen3
  # (a rerun keeps the files it finds: delete them to make them again)
  # 3. truth: SET=unseen3 tools/realworld/record.sh 1.23.2 1.24.4 1.31.1, then cpu_truth.py

File names say how a model was made:
  tf.*       Keras (tensorflow-cpu) by tf2onnx: MobileNetV2 (alpha 0.35), an NHWC convnet
             (depthwise/separable convs, swish, ReLU6, squeeze-excite, Conv2DTranspose, bilinear
             UpSampling; opset 13), a bidirectional LSTM + GRU, a transformer block
             (MultiHeadAttention, LayerNormalization, swish)
  tv.*       torchvision models (weights=None) by torch.onnx.export (TorchScript, opset 17):
             Faster R-CNN / Mask R-CNN / RetinaNet with a small FPN backbone (RoiAlign,
             NonMaxSuppression, TopK, If, dynamic image size), DeepLabV3 (ASPP, Resize),
             MobileNetV3-small and MobileNetV2 (width 0.25: HardSwish/HardSigmoid, Clip)
  timm.*     timm models (EfficientNet at channel multiplier 0.25, RegNet, LeViT
             at small configs by TorchScript; ConvNeXt by torch.onnx.export(dynamo=True))
  hf.*       transformers: wav2vec2 (Conv1d + GroupNorm), HuBERT (conv LayerNorm, dynamo), T5
             encoder-decoder (relative position bias), DETR (HF ResNet backbone), SegFormer (dynamo)
  rnn.*      torch LSTM + GRU (TorchScript)
  ortopt*.unet  diffusers UNet2DConditionModel (tiny) through ORT's optimizer, model_type unet
             (NhwcConv, GroupNorm...; its float16 conversion fails to load); ortopt.t5 model_type t5
  qdqpre.*   quant_pre_process, then quantize_static QDQ (per-channel)
  qdqded.*   QDQ with DedicatedQDQPair + AddQDQPairToWeight; qdqkeep.* QDQKeepRemovableActivations
  qdqpc.*    per-channel QDQ (reduce_range) of a Relu/Clip convnet (MobileNetV2)
  qdqf8.*    float8 (E4M3FN) QDQ of the MatMuls (CPU-only sessions at `extended`/`all` fail: the CPU wheel
             fuses a QLinearMatMul typed float8; the stubbed-GPU oracle loads it)
  qdynlstm.* quantize_dynamic of the recurrent net (DynamicQuantizeLSTM)
  nbitshqq.* 4-bit HQQ (MatMulNBits); nbits-acc1.* default RTN at accuracy_level 1
  sim.* onnxsim; onnxopt.* onnxoptimizer; lgbm.* onnxmltools (LightGBM)
"""
import os
import sys


def _zero_big_floats(m, limit=256):
    """Zero every floating-point tensor of `limit` or more elements (initializers and Constant
    nodes, subgraphs included): the structure, types and shapes stay, the file compresses."""
    import numpy as np
    from onnx import TensorProto, numpy_helper

    floats = {TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.BFLOAT16}

    def fix(t):
        if t.data_type not in floats or t.data_location == TensorProto.EXTERNAL:
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


def _save(model, path):
    import onnx

    onnx.save_model(_zero_big_floats(model), path, save_as_external_data=False)
    print("wrote", path, os.path.getsize(path), flush=True)


def _single_file(tmp, out):
    import onnx

    return onnx.load(tmp, load_external_data=True)


def torch_models(out, scratch):
    import torch
    import torch.nn as nn

    os.makedirs(out, exist_ok=True)
    os.makedirs(scratch, exist_ok=True)
    import onnx

    def keep(name, tmp, to_out=True):
        m = onnx.load(tmp, load_external_data=True)
        onnx.save_model(m, os.path.join(scratch, name + ".onnx"), save_as_external_data=False)
        if to_out:
            _save(m, os.path.join(out, name + ".onnx"))

    def done(name, to_out):
        # the exports are deterministic: a rerun keeps the ones already made (delete to redo)
        return os.path.exists(os.path.join(scratch, name + ".onnx")) and (
            not to_out or os.path.exists(os.path.join(out, name + ".onnx")))

    def ts(name, module, args, names, outs, axes, to_out=True, opset=17):
        if done(name, to_out):
            return
        tmp = os.path.join(scratch, name + ".tmp.onnx")
        torch.onnx.export(module.eval(), args, tmp, dynamo=False, opset_version=opset, input_names=names,
                          output_names=outs, dynamic_axes=axes)
        keep(name, tmp, to_out)

    def dyn(name, module, args, names, outs, shapes, to_out=True):
        if done(name, to_out):
            return
        tmp = os.path.join(scratch, name + ".tmp.onnx")
        torch.onnx.export(module.eval(), args, tmp, dynamo=True, dynamic_shapes=shapes, input_names=names,
                          output_names=outs)
        keep(name, tmp, to_out)

    D = torch.export.Dim

    # ---- torchvision detection / segmentation with a small FPN backbone
    from torchvision.models.detection import FasterRCNN, MaskRCNN, RetinaNet
    from torchvision.models.detection.anchor_utils import AnchorGenerator
    from torchvision.models.detection.backbone_utils import BackboneWithFPN
    from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead
    from torchvision.models.detection.mask_rcnn import MaskRCNNHeads, MaskRCNNPredictor
    from torchvision.ops import MultiScaleRoIAlign

    class Body(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.BatchNorm2d(8), nn.ReLU())
            self.l2 = nn.Sequential(nn.Conv2d(8, 16, 3, 2, 1), nn.BatchNorm2d(16), nn.ReLU())
            self.l3 = nn.Sequential(nn.Conv2d(16, 16, 3, 2, 1), nn.BatchNorm2d(16), nn.ReLU())

        def forward(self, x):
            return self.l3(self.l2(self.l1(x)))

    def fpn():
        return BackboneWithFPN(Body(), {"l2": "0", "l3": "1"}, [16, 16], 16)

    img = ([torch.rand(3, 64, 64)],)
    det_axes = {"images": {1: "h", 2: "w"}}
    common = dict(min_size=64, max_size=64, box_detections_per_img=10)
    rpn = dict(rpn_pre_nms_top_n_test=50, rpn_post_nms_top_n_test=20)

    def anchors(n):
        return AnchorGenerator(sizes=((16,), (32,), (64,)), aspect_ratios=((0.5, 1.0, 2.0),) * 3)

    torch.manual_seed(0)
    frcnn = FasterRCNN(fpn(), num_classes=None, rpn_anchor_generator=anchors(3),
                       box_roi_pool=MultiScaleRoIAlign(["0", "1"], 7, 2), box_head=TwoMLPHead(16 * 49, 32),
                       box_predictor=FastRCNNPredictor(32, 3), **common, **rpn)
    ts("tv.fasterrcnn", frcnn, img, ["images"], ["boxes", "labels", "scores"], det_axes)
    torch.manual_seed(0)
    mrcnn = MaskRCNN(fpn(), num_classes=None, rpn_anchor_generator=anchors(3),
                     box_roi_pool=MultiScaleRoIAlign(["0", "1"], 7, 2), box_head=TwoMLPHead(16 * 49, 32),
                     box_predictor=FastRCNNPredictor(32, 3), mask_roi_pool=MultiScaleRoIAlign(["0", "1"], 14, 2),
                     mask_head=MaskRCNNHeads(16, [16], 1), mask_predictor=MaskRCNNPredictor(16, 16, 3), **common,
                     **rpn)
    ts("tv.maskrcnn", mrcnn, img, ["images"], ["boxes", "labels", "scores", "masks"], det_axes)
    torch.manual_seed(0)
    from torchvision.models.detection.retinanet import RetinaNetHead

    ag = AnchorGenerator(sizes=((16,), (32,), (64,)), aspect_ratios=((0.5, 1.0, 2.0),) * 3)
    retina = RetinaNet(fpn(), num_classes=3, anchor_generator=ag, head=RetinaNetHead(16, 3, 3), topk_candidates=50,
                       detections_per_img=10, min_size=64, max_size=64)
    ts("tv.retinanet", retina, img, ["images"], ["boxes", "scores", "labels"], det_axes)

    from torchvision.models._utils import IntermediateLayerGetter
    from torchvision.models.segmentation.deeplabv3 import ASPP, DeepLabV3

    torch.manual_seed(0)
    head = nn.Sequential(ASPP(16, [2, 4, 6], out_channels=16), nn.Conv2d(16, 16, 3, padding=1, bias=False),
                         nn.BatchNorm2d(16), nn.ReLU(), nn.Conv2d(16, 3, 1))
    deeplab = DeepLabV3(IntermediateLayerGetter(Body(), {"l3": "out"}), head)

    class Seg(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            return self.m(x)["out"]

    ts("tv.deeplabv3", Seg(deeplab), (torch.rand(1, 3, 64, 64),), ["input"], ["out"],
       {"input": {0: "batch", 2: "h", 3: "w"}})

    import torchvision

    torch.manual_seed(0)
    mbv3 = torchvision.models.mobilenet_v3_small(weights=None, width_mult=0.25, num_classes=10)
    ts("tv.mobilenetv3s", mbv3, (torch.rand(1, 3, 64, 64),), ["input"], ["logits"], {"input": {0: "batch"}})
    torch.manual_seed(0)
    mbv2 = torchvision.models.mobilenet_v2(weights=None, width_mult=0.25, num_classes=10)
    ts("tv.mobilenetv2", mbv2, (torch.rand(1, 3, 64, 64),), ["input"], ["logits"], {"input": {0: "batch"}},
       to_out=False)

    # ---- timm
    import timm.models.convnext as cnx
    import timm.models.efficientnet as eff
    import timm.models.levit as lev
    import timm.models.regnet as reg

    x64 = (torch.rand(1, 3, 64, 64),)
    b_axes = {"input": {0: "batch"}}
    torch.manual_seed(0)
    ts("timm.efficientnet", eff._gen_efficientnet("efficientnet_b0", 0.25, 0.25, num_classes=10), x64, ["input"],
       ["logits"], b_axes)
    torch.manual_seed(0)
    torch.manual_seed(0)
    rcfg = reg.RegNetCfg(depth=6, w0=8, wa=8.0, wm=1.5, group_size=8, se_ratio=0.25, stem_width=8)
    ts("timm.regnet", reg.RegNet(rcfg, num_classes=10), x64, ["input"], ["logits"], b_axes)
    torch.manual_seed(0)
    levit = lev.Levit(img_size=64, num_classes=10, embed_dim=(32, 48), key_dim=8, depth=(1, 1), num_heads=(2, 3))
    ts("timm.levit", levit, x64, ["input"], ["logits"], b_axes)
    torch.manual_seed(0)
    convnext = cnx.ConvNeXt(depths=(1, 1, 1, 1), dims=(8, 16, 24, 32), num_classes=10)
    dyn("timm.convnext", convnext, (torch.rand(2, 3, 64, 64),), ["input"], ["logits"], ({0: D("batch")},))

    # ---- transformers
    import transformers as tf

    torch.manual_seed(0)
    w2v = tf.Wav2Vec2Model(tf.Wav2Vec2Config(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, conv_dim=(16, 16, 16),
        conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
        feat_extract_norm="group")).eval()

    class Last(nn.Module):
        def __init__(self, m, **kw):
            super().__init__()
            self.m, self.kw = m, kw

        def forward(self, x):
            return self.m(x, **self.kw).last_hidden_state

    ts("hf.wav2vec2", Last(w2v), (torch.randn(1, 1600),), ["input_values"], ["last_hidden_state"],
       {"input_values": {0: "batch", 1: "samples"}})
    torch.manual_seed(0)
    hub = tf.HubertModel(tf.HubertConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, conv_dim=(16, 16, 16),
        conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
        feat_extract_norm="layer", do_stable_layer_norm=True)).eval()
    dyn("hf.hubert", Last(hub), (torch.randn(2, 1600),), ["input_values"], ["last_hidden_state"],
        ({0: D("batch"), 1: D("samples", min=400)},))

    torch.manual_seed(0)
    t5 = tf.T5ForConditionalGeneration(tf.T5Config(
        vocab_size=256, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
        decoder_start_token_id=0, pad_token_id=0)).eval()

    class T5(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, decoder_input_ids):
            return self.m(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids,
                          use_cache=False).logits

    ids = torch.randint(1, 256, (2, 9))
    ts("hf.t5", T5(t5), (ids, torch.ones_like(ids), torch.randint(1, 256, (2, 4))),
       ["input_ids", "attention_mask", "decoder_input_ids"], ["logits"],
       {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
        "decoder_input_ids": {0: "batch", 1: "dec"}})

    torch.manual_seed(0)
    detr = tf.DetrForObjectDetection(tf.DetrConfig(
        use_timm_backbone=False, use_pretrained_backbone=False,
        backbone_config=tf.ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic",
                                        out_features=["stage2"]),
        d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=64, decoder_ffn_dim=64, num_queries=10, num_labels=3)).eval()

    class Detr(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, pixel_values):
            o = self.m(pixel_values=pixel_values)
            return o.logits, o.pred_boxes

    ts("hf.detr", Detr(detr), (torch.randn(1, 3, 64, 64),), ["pixel_values"], ["logits", "pred_boxes"],
       {"pixel_values": {0: "batch"}})
    torch.manual_seed(0)
    seg = tf.SegformerForSemanticSegmentation(tf.SegformerConfig(
        num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32], patch_sizes=[7, 3],
        strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2], decoder_hidden_size=32, num_labels=3)).eval()

    class Logits(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            return self.m(pixel_values=x).logits

    dyn("hf.segformer", Logits(seg), (torch.randn(2, 3, 64, 64),), ["pixel_values"], ["logits"],
        ({0: D("batch")},))

    # ---- recurrent: LSTM + GRU
    class Rnn(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(16, 32, batch_first=True, bidirectional=True)
            self.gru = nn.GRU(64, 32, batch_first=True)
            self.fc = nn.Linear(32, 8)

        def forward(self, x):
            y, _ = self.lstm(x)
            z, _ = self.gru(y)
            return self.fc(z)

    torch.manual_seed(0)
    ts("rnn.lstm-gru", Rnn(), (torch.randn(1, 10, 16),), ["x"], ["y"], {"x": {0: "batch", 1: "time"}})

    # ---- diffusers: a tiny UNet2DConditionModel (for ORT's optimizer, model_type unet)
    from diffusers import UNet2DConditionModel

    torch.manual_seed(0)
    unet = UNet2DConditionModel(sample_size=8, in_channels=4, out_channels=4, layers_per_block=1,
                                block_out_channels=(8, 16), down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                                up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=16,
                                attention_head_dim=4, norm_num_groups=4).eval()

    class Unet(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, sample, timestep, encoder_hidden_states):
            return self.m(sample, timestep, encoder_hidden_states, return_dict=False)[0]

    ts("ts.unet", Unet(unet), (torch.randn(1, 4, 8, 8), torch.tensor([10], dtype=torch.int64),
                               torch.randn(1, 7, 16)), ["sample", "timestep", "encoder_hidden_states"], ["out_sample"],
       {"sample": {0: "batch"}, "timestep": {0: "batch"}, "encoder_hidden_states": {0: "batch", 1: "seq"}},
       to_out=False)


def derive(out, scratch):
    import numpy as np
    import onnx

    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(0)
    S = lambda n: os.path.join(scratch, n)  # noqa: E731

    from onnxruntime.quantization import CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType, quantize_dynamic, \
        quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self, feeds):
            self.it = iter(feeds)

        def get_next(self):
            return next(self.it, None)

    def qdq(src, dst, feeds, **kw):
        if os.path.exists(os.path.join(out, dst)):  # deterministic: a rerun keeps what is made
            return
        tmp = S(dst + ".tmp")
        quantize_static(src, tmp, Reader(feeds), quant_format=QuantFormat.QDQ, **kw)
        _save(onnx.load(tmp), os.path.join(out, dst))

    px = lambda: [{"input": rng.standard_normal((1, 3, 64, 64)).astype(np.float32)} for _ in range(2)]  # noqa

    # quant_pre_process (symbolic shape inference + ORT basic optimisation), then QDQ
    from onnxruntime.quantization.shape_inference import quant_pre_process

    quant_pre_process(S("tv.mobilenetv3s.onnx"), S("pre.tv.mobilenetv3s.onnx"))
    qdq(S("pre.tv.mobilenetv3s.onnx"), "qdqpre.tv.mobilenetv3s.onnx", px(), per_channel=True,
        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    qdq(S("timm.efficientnet.onnx"), "qdqded.timm.efficientnet.onnx", px(), activation_type=QuantType.QUInt8,
        weight_type=QuantType.QUInt8, extra_options={"DedicatedQDQPair": True, "AddQDQPairToWeight": True})
    qdq(S("tv.deeplabv3.onnx"), "qdqkeep.tv.deeplabv3.onnx", px(), activation_type=QuantType.QInt8,
        weight_type=QuantType.QInt8, extra_options={"QDQKeepRemovableActivations": True})
    qdq(S("tv.mobilenetv2.onnx"), "qdqpc.tv.mobilenetv2.onnx", px(), per_channel=True, reduce_range=True,
        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    qdq(S("timm.convnext.onnx"), "qdqf8.timm.convnext.onnx", px(), activation_type=QuantType.QFLOAT8E4M3FN,
        weight_type=QuantType.QFLOAT8E4M3FN, op_types_to_quantize=["MatMul", "Gemm"],
        calibrate_method=CalibrationMethod.Distribution)

    # dynamic quantization of the recurrent net (LSTM -> DynamicQuantizeLSTM)
    quantize_dynamic(S("rnn.lstm-gru.onnx"), S("qdynlstm.tmp"), weight_type=QuantType.QInt8)
    _save(onnx.load(S("qdynlstm.tmp")), os.path.join(out, "qdynlstm.rnn.lstm-gru.onnx"))

    # 4-bit: HQQ, and RTN at accuracy_level 1
    from onnxruntime.quantization.matmul_nbits_quantizer import HQQWeightOnlyQuantConfig, MatMulNBitsQuantizer

    q = MatMulNBitsQuantizer(onnx.load(S("hf.t5.onnx")), algo_config=HQQWeightOnlyQuantConfig(block_size=32))
    q.process()
    _save(q.model.model, os.path.join(out, "nbitshqq.hf.t5.onnx"))
    q = MatMulNBitsQuantizer(onnx.load(S("hf.hubert.onnx")), block_size=32, is_symmetric=True, accuracy_level=1)
    q.process()
    _save(q.model.model, os.path.join(out, "nbits-acc1.hf.hubert.onnx"))

    # ORT's transformer optimizer: unet (fp16 too), t5
    from onnxruntime.transformers.optimizer import optimize_model

    from onnxruntime.transformers.fusion_options import FusionOptions

    def unet():
        # the attention fusion of this ORT release fails on torch 2's scaled_dot_product_attention
        # export (fusion_attention_unet.get_num_heads); every other unet fusion runs
        o = FusionOptions("unet")
        o.enable_attention = False
        return optimize_model(S("ts.unet.onnx"), model_type="unet", num_heads=0, hidden_size=0, use_gpu=True,
                              opt_level=0, optimization_options=o)

    _save(unet().model, os.path.join(out, "ortopt.unet.onnx"))
    m = unet()
    # a load failure: the converter makes the Constant that feeds Resize's scales float16
    m.convert_float_to_float16(keep_io_types=True)
    _save(m.model, os.path.join(out, "ortopt-fp16.unet.onnx"))
    m = optimize_model(S("hf.t5.onnx"), model_type="t5", num_heads=4, hidden_size=32, use_gpu=True, opt_level=0)
    _save(m.model, os.path.join(out, "ortopt.t5.onnx"))

    # onnxsim and onnxoptimizer
    import onnxoptimizer
    import onnxsim

    sm, ok = onnxsim.simplify(onnx.load(S("tv.fasterrcnn.onnx")))
    assert ok
    _save(sm, os.path.join(out, "sim.tv.fasterrcnn.onnx"))
    sm, ok = onnxsim.simplify(onnx.load(S("hf.detr.onnx")))
    assert ok
    _save(sm, os.path.join(out, "sim.hf.detr.onnx"))
    _save(onnxoptimizer.optimize(onnx.load(S("timm.levit.onnx"))), os.path.join(out, "onnxopt.timm.levit.onnx"))
    _save(onnxoptimizer.optimize(onnx.load(S("hf.wav2vec2.onnx")), onnxoptimizer.get_fuse_and_elimination_passes()),
          os.path.join(out, "onnxopt.hf.wav2vec2.onnx"))

    # onnxmltools: LightGBM
    lgbm(out, rng)


def lgbm(out, rng):
    import lightgbm
    import numpy as np
    import onnxmltools
    from onnxmltools.convert.common.data_types import FloatTensorType

    X = rng.standard_normal((200, 6)).astype(np.float32)
    y = (X[:, 0] + X[:, 1] > 0).astype(np.int64) + (X[:, 2] > 1).astype(np.int64)
    clf = lightgbm.LGBMClassifier(n_estimators=4, num_leaves=4, random_state=0, verbose=-1,
                                  deterministic=True, n_jobs=1).fit(X, y)
    _save(onnxmltools.convert_lightgbm(clf, initial_types=[("input", FloatTensorType([None, 6]))], target_opset=15,
                                       zipmap=False), os.path.join(out, "lgbm.clf.onnx"))


def tf_models(out):
    """Keras models converted by tf2onnx (NHWC graphs, Transposes around the convolutions)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf
    import tf2onnx

    os.makedirs(out, exist_ok=True)
    K = tf.keras
    L = K.layers

    def conv(name, model, shape, opset=17):
        spec = (tf.TensorSpec((None, *shape), tf.float32, name="input"),)
        mp, _ = tf2onnx.convert.from_keras(model, input_signature=spec, opset=opset)
        _save(mp, os.path.join(out, name + ".onnx"))

    K.utils.set_random_seed(0)
    conv("tf.mobilenetv2", K.applications.MobileNetV2(input_shape=(64, 64, 3), alpha=0.35, weights=None,
                                                      classes=10), (64, 64, 3))
    K.utils.set_random_seed(0)
    x = inp = K.Input((64, 64, 3))
    x = L.Conv2D(16, 3, strides=2, padding="same", use_bias=False)(x)
    x = L.BatchNormalization()(x)
    x = L.Activation("swish")(x)
    x = L.DepthwiseConv2D(3, padding="same")(x)
    x = L.BatchNormalization()(x)
    x = L.ReLU(6.0)(x)
    x = L.SeparableConv2D(24, 3, padding="same", activation="relu")(x)
    x = L.MaxPooling2D(2)(x)
    y = L.Conv2D(24, 1, activation="sigmoid")(L.GlobalAveragePooling2D(keepdims=True)(x))
    x = L.Multiply()([x, y])
    x = L.Conv2DTranspose(8, 2, strides=2)(x)
    x = L.UpSampling2D(2, interpolation="bilinear")(x)
    x = L.Conv2D(3, 1)(x)
    conv("tf.convnet-nhwc", K.Model(inp, x), (64, 64, 3), opset=13)
    K.utils.set_random_seed(0)
    x = inp = K.Input((None, 12))
    x = L.Bidirectional(L.LSTM(16, return_sequences=True))(x)
    x = L.GRU(16, return_sequences=True)(x)
    x = L.Dense(4, activation="softmax")(x)
    conv("tf.lstm-gru", K.Model(inp, x), (None, 12))
    K.utils.set_random_seed(0)
    x = inp = K.Input((None, 32))
    a = L.MultiHeadAttention(num_heads=4, key_dim=8)(x, x)
    x = L.LayerNormalization(epsilon=1e-6)(x + a)
    f = L.Dense(64, activation="swish")(x)
    x = L.LayerNormalization(epsilon=1e-6)(x + L.Dense(32)(f))
    x = L.GlobalAveragePooling1D()(x)
    conv("tf.transformer", K.Model(inp, L.Dense(3)(x)), (None, 32))


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "torch":
        torch_models(sys.argv[2], sys.argv[3])
    elif len(sys.argv) >= 3 and sys.argv[1] == "tf":
        tf_models(sys.argv[2])
    elif len(sys.argv) >= 4 and sys.argv[1] == "derive":
        derive(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
